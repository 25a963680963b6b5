"""Core tables: people, courses, homework settings and submissions.

A submission keeps its files in the database (with their sha256) and its
report as JSON beside indexed score columns, so the web app, the worker and
the exports read one source of truth.
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from flask_login import UserMixin
from sqlalchemy import (JSON, Boolean, DateTime, Float, ForeignKey, Integer, LargeBinary, String,
                        Text, UniqueConstraint)
from sqlalchemy.orm import Mapped, mapped_column, relationship
from werkzeug.security import check_password_hash, generate_password_hash

from server.extensions import db


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Role(str, Enum):
    STUDENT = "student"
    INSTRUCTOR = "instructor"


class SubmissionStatus(str, Enum):
    QUEUED = "queued"  # stored, handed (or about to be handed) to the queue
    RUNNING = "running"  # a worker holds its lease
    GRADED = "graded"  # report stored; counts as an attempt
    ERROR = "error"  # grading failed (infrastructure or grader bug); staff notified, not counted
    REPLACED = "replaced"  # a newer upload took its place in the queue; never graded, not counted


# The two groups of statuses every page, export and query asks about, spelled once here (templates
# get them as Jinja globals from the app factory). The moves between statuses: ``server.grading.lifecycle``.
PENDING_STATUSES = (SubmissionStatus.QUEUED.value, SubmissionStatus.RUNNING.value)  # a result is coming
FINISHED_STATUSES = (SubmissionStatus.GRADED.value, SubmissionStatus.ERROR.value)  # a run ended: report or error


class User(UserMixin, db.Model):
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(80), unique=True, index=True)
    display_name: Mapped[str] = mapped_column(String(120), default="")
    email: Mapped[str] = mapped_column(String(200), default="")
    password_hash: Mapped[str] = mapped_column(String(256))
    locale: Mapped[str | None] = mapped_column(String(10), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # Stored in the session at sign-in; logout and a password change bump it, which ends every
    # session begun before (``server.auth.views``: the user loader and the session-authorised paths).
    session_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    memberships: Mapped[list["Membership"]] = relationship(back_populates="user")

    def set_password(self, password: str) -> None:
        """Set a new password; changing an existing one signs the user out everywhere."""
        if self.password_hash:
            self.session_version = (self.session_version or 0) + 1
        self.password_hash = generate_password_hash(password)

    def check_password(self, password: str) -> bool:
        return check_password_hash(self.password_hash, password)

    def role_in(self, course_id: int) -> Role | None:
        """This user's role in a course, or None if not enrolled."""
        for m in self.memberships:
            if m.course_id == course_id:
                return Role(m.role)
        return None

    @property
    def is_instructor_anywhere(self) -> bool:
        return any(m.role == Role.INSTRUCTOR.value for m in self.memberships)


class Course(db.Model):
    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(40), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # Free-text verdicts no teacher confirmed yet: False (shipped) counts them only once a teacher
    # confirms; True counts the reader's suggestion at once, marked unconfirmed (``server.quiz.labels``)
    count_unconfirmed: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")

    memberships: Mapped[list["Membership"]] = relationship(back_populates="course")
    homework: Mapped[list["CourseAssignment"]] = relationship(back_populates="course")


class Membership(db.Model):
    __table_args__ = (UniqueConstraint("user_id", "course_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    role: Mapped[str] = mapped_column(String(20), default=Role.STUDENT.value)

    user: Mapped[User] = relationship(back_populates="memberships")
    course: Mapped[Course] = relationship(back_populates="memberships")


class CourseAssignment(db.Model):
    """A homework folder (``assignments/<id>``) published in a course with its rules."""

    __table_args__ = (UniqueConstraint("course_id", "assignment_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    assignment_id: Mapped[str] = mapped_column(String(80))
    deadline: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    attempt_limit: Mapped[int] = mapped_column(Integer, default=10)
    late_penalty_per_day: Mapped[float] = mapped_column(Float, default=0.0)
    score_policy: Mapped[str] = mapped_column(String(10), default="best")  # best | last
    published: Mapped[bool] = mapped_column(Boolean, default=True)

    course: Mapped[Course] = relationship(back_populates="homework")


class Submission(db.Model):
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    assignment_id: Mapped[str] = mapped_column(String(80), index=True)
    status: Mapped[str] = mapped_column(String(20), default=SubmissionStatus.QUEUED.value, index=True)
    mode: Mapped[str] = mapped_column(String(10), default="cpu")
    resource: Mapped[str] = mapped_column(String(20), default="cpu")  # queue name

    filename: Mapped[str] = mapped_column(String(255))
    # Deferred: the status API is polled every second and must not drag file and report along.
    content: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(Integer)

    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    # The fair queue: since when the student waits for this result (a replacement keeps the
    # place of the upload it replaced), and which newer upload replaced this one.
    queued_since: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    replaced_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)

    # Queue bookkeeping: job ids are "sub-<id>-g<enqueue_gen>" so re-enqueueing is idempotent.
    job_id: Mapped[str | None] = mapped_column(String(80), nullable=True)
    enqueue_gen: Mapped[int] = mapped_column(Integer, default=0)
    run_token: Mapped[str | None] = mapped_column(String(40), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    infra_retries: Mapped[int] = mapped_column(Integer, default=0)
    grading_runs: Mapped[int] = mapped_column(Integer, default=0)  # how often a grader started
    results_stored: Mapped[int] = mapped_column(Integer, default=0)  # must end at exactly 1

    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    report_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, deferred=True)
    error_detail: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)  # staff only
    progress_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Integrity review (graders.integrity): "pending" while the grade counts 0, then "accepted"
    # (score = computed_score) or "rejected" (0); None when the grading raised no integrity event.
    review_status: Mapped[str | None] = mapped_column(String(20), nullable=True, index=True)
    computed_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    review_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    reviewed_by: Mapped[int | None] = mapped_column(ForeignKey("user.id"), nullable=True)
    reviewed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)

    user: Mapped[User] = relationship(foreign_keys=[user_id])

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    @property
    def counts_as_attempt(self) -> bool:
        return self.status == SubmissionStatus.GRADED.value


# The columns ``status_dict`` reads: the polled status API selects just these, no ORM object.
STATUS_COLUMNS = ("id", "assignment_id", "status", "filename", "sha256", "created_at", "enqueued_at",
                  "started_at", "finished_at", "score", "max_score", "progress_json", "job_id", "resource",
                  "user_id", "queued_since", "replaced_by", "course_id", "lease_until")


def status_dict(sub: Any) -> dict[str, Any]:
    """The status fields of a submission, from a ``Submission`` or a row of ``STATUS_COLUMNS``."""
    return {
        "id": sub.id,
        "assignment": sub.assignment_id,
        "status": sub.status,
        "filename": sub.filename,
        "sha256": sub.sha256,
        "created_at": _iso(sub.created_at),
        "enqueued_at": _iso(sub.enqueued_at),
        "started_at": _iso(sub.started_at),
        "finished_at": _iso(sub.finished_at),
        "score": sub.score,
        "max_score": sub.max_score,
        "progress": sub.progress_json,
        "replaced_by": sub.replaced_by,
    }


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() + "Z" if dt else None
