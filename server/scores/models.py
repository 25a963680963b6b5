"""Dashboard tables: regrades, score overrides with their audit log, manual cell scores, extensions.

Auto and manual scores stay apart (as in nbgrader): the grader's score lives on the
submission, a manual cell score in ``ManualCellScore`` and an instructor's override of a
gradebook cell in ``ScoreOverride``. Every manual change also appends an ``AuditEntry``
(who, when, old, new, why) that is never edited.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from server.extensions import db
from server.models import utcnow
from server.models import Submission
from server.quiz.models import QuizAttempt


class Regrade(db.Model):
    """A submission put back in the queue after a grader change, with the score it had before."""

    id: Mapped[int] = mapped_column(primary_key=True)
    batch: Mapped[str] = mapped_column(String(40), index=True)  # one per regrade action
    submission_id: Mapped[int] = mapped_column(ForeignKey("submission.id"), index=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    assignment_id: Mapped[str] = mapped_column(String(80))
    old_status: Mapped[str] = mapped_column(String(20))
    old_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    old_max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the score that counted before (grader's + hand-given, ``hand_scores``): what the summary compares
    old_counted: Mapped[float | None] = mapped_column(Float, nullable=True)
    requested_by: Mapped[int] = mapped_column(ForeignKey("user.id"))
    requested_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ScoreOverride(db.Model):
    """The instructor's score for one gradebook cell (student x item), replacing the computed one."""

    __table_args__ = (UniqueConstraint("course_id", "user_id", "item"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    item: Mapped[str] = mapped_column(String(200))  # "hw:<assignment_id>" | "quiz:<quiz_id>"
    score: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    set_by: Mapped[int] = mapped_column(ForeignKey("user.id"))
    set_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


REGRADE_CELL_PREFIX = "regrade."  # ManualCellScore.cell_id of a check a teacher re-scored: "regrade.<check id>"


class ManualCellScore(db.Model):
    """A free-text cell graded by hand, per (submission, cell id); added to the auto score."""

    __table_args__ = (UniqueConstraint("submission_id", "cell_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submission.id"), index=True)
    cell_id: Mapped[str] = mapped_column(String(120))
    score: Mapped[float] = mapped_column(Float)
    max_points: Mapped[float] = mapped_column(Float)
    comment: Mapped[str] = mapped_column(Text, default="")
    graded_by: Mapped[int] = mapped_column(ForeignKey("user.id"))
    graded_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ProvisionalField(db.Model):
    """A homework-2 annotation whose reading waits for a teacher, per (submission, check id): the
    reading's suggested points (``provisional``) on the scale of the check that holds it. Derived from
    the stored report (``server.scores.provisional_fields.sync``); a ``ManualCellScore`` with the same
    check id is the teacher's decision, after which the row no longer counts as unconfirmed."""

    submission_id: Mapped[int] = mapped_column(ForeignKey("submission.id"), primary_key=True)
    check_id: Mapped[str] = mapped_column(String(120), primary_key=True)
    provisional: Mapped[float] = mapped_column(Float)


class AuditEntry(db.Model):
    """One manual change to a score: append-only."""

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"))  # the student whose score changed
    target: Mapped[str] = mapped_column(String(240))  # "hw:ddp_speedup" | "sub:12/cell:q3" | ...
    old: Mapped[float | None] = mapped_column(Float, nullable=True)
    new: Mapped[float | None] = mapped_column(Float, nullable=True)
    reason: Mapped[str] = mapped_column(Text)
    actor_id: Mapped[int] = mapped_column(ForeignKey("user.id"))
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)


class Extension(db.Model):
    """A later deadline for one student on one homework."""

    __table_args__ = (UniqueConstraint("course_assignment_id", "user_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    course_assignment_id: Mapped[int] = mapped_column(ForeignKey("course_assignment.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    deadline: Mapped[datetime] = mapped_column(DateTime)
    reason: Mapped[str] = mapped_column(Text, default="")
    granted_by: Mapped[int] = mapped_column(ForeignKey("user.id"))
    granted_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


# The gradebook groups submissions and finished attempts by (course, status, student, item) and
# reads only the indexed columns;
# declared here so the model metadata matches migration 0003 without editing the core tables.
def _gradebook_indexes() -> None:
    from sqlalchemy import Index


    Index("ix_submission_gradebook", Submission.course_id, Submission.status, Submission.user_id,
          Submission.assignment_id, Submission.created_at, Submission.score, Submission.max_score)
    Index("ix_quiz_attempt_gradebook", QuizAttempt.course_id, QuizAttempt.status, QuizAttempt.user_id,
          QuizAttempt.quiz_id, QuizAttempt.score, QuizAttempt.max_score, QuizAttempt.attempt_no)


_gradebook_indexes()


class AnnotationReviewRequest(db.Model):
    """A student's "I think this is right — ask the teacher" on one auto-graded annotation field
    (``field.<path>`` of a graded submission), once per answer. ``auto_points`` is what the field
    counts in the submission's score (when asked, and again when decided, in case a regrade
    changed it): a teacher's decision (a ``ManualCellScore`` of the same cell) replaces it, so
    the gradebook adds the decision minus these points."""

    __table_args__ = (UniqueConstraint("submission_id", "check_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submission.id"), index=True)
    check_id: Mapped[str] = mapped_column(String(120))
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    comment: Mapped[str] = mapped_column(Text)
    auto_points: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)  # set when a teacher decides
