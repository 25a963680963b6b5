"""Homework rules that the upload page and the list both need: what is published, attempts, deadlines.

Only graded submissions use up an attempt; a grading error never costs the student one.
A student has at most one pending (waiting or running) submission per homework: a new
upload replaces it (``server.grading.queue.submit``), so quick uploads can never turn into more
graded attempts than the course allows and a replacement needs no attempt of its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import abort
from flask_babel import gettext as _
from sqlalchemy import func

from coursework.assignments import Assignment, load
from coursework.exceptions import AssignmentNotFound
from server.extensions import db
from server.homework.points import natural_key
from server.scores.release import is_released
from server.models import PENDING_STATUSES, Course, CourseAssignment, Role, Submission, SubmissionStatus, User, utcnow
from server.scores.actions import pending_regrades
from server.scores.hand_scores import added_points_table, counted_score
from server.scores.models import Extension
from server.scores.gradebook import build_gradebook


@dataclass
class Homework:
    """One published assignment of a course, as the signed-in user sees it."""

    course: Course
    settings: CourseAssignment
    assignment: Assignment
    used: int = 0  # graded submissions
    pending: int = 0  # queued or running
    best: float | None = None
    max_score: float | None = None  # what the homework is out of (its definition)
    extension: datetime | None = None  # this student's own later deadline, if granted
    counted: Any = None  # the gradebook's Cell for this student: the score that counts, override and reason
    released: bool = True  # the student may see its scores now (``server.scores.release``; staff always may)

    @property
    def deadline(self) -> datetime | None:
        """The deadline that applies to this student: their extension, else the course's."""
        return self.extension or self.settings.deadline

    @property
    def past_deadline(self) -> bool:
        return self.deadline is not None and utcnow() > self.deadline

    @property
    def attempts_left(self) -> int:
        return max(0, self.settings.attempt_limit - self.used - self.pending)


def attempt_counts(user_id: int, course_id: int, assignment_id: str) -> tuple[int, int, float | None, float | None]:
    """(graded, pending, best score, max score) of one user's submissions to one homework; a score
    with what hand-given scores add (``server.scores.hand_scores``, as the gradebook)."""
    added = added_points_table()
    rows = db.session.execute(
        db.select(Submission.status, func.count(), func.max(counted_score(added)), func.max(Submission.max_score))
        .outerjoin(added, added.c.sid == Submission.id)
        .where(Submission.user_id == user_id, Submission.course_id == course_id,
               Submission.assignment_id == assignment_id)
        .group_by(Submission.status)).all()
    graded = sum(n for status, n, _, _ in rows if status == SubmissionStatus.GRADED.value)
    pending = sum(n for status, n, _, _ in rows if status in PENDING_STATUSES)
    if pending:  # a graded upload queued again by a regrade is still a used attempt, not a new one
        again = regraded_attempts(user_id, course_id, assignment_id)
        graded, pending = graded + again, pending - again
    best = next((b for status, _, b, _ in rows if status == SubmissionStatus.GRADED.value), None)
    top = next((m for status, _, _, m in rows if status == SubmissionStatus.GRADED.value), None)
    return graded, pending, best, top


def regraded_attempts(user_id: int, course_id: int, assignment_id: str) -> int:
    """How many of the user's waiting or running uploads are graded ones put back by a regrade."""
    ids = list(db.session.scalars(db.select(Submission.id).where(
        Submission.user_id == user_id, Submission.course_id == course_id, Submission.assignment_id == assignment_id,
        Submission.status.in_(PENDING_STATUSES))))
    return sum(1 for r in pending_regrades(ids).values() if r.old_status == SubmissionStatus.GRADED.value)


def homework_for(user: User) -> list[Homework]:
    """Every homework of the user's courses (students see only published ones), by course then deadline."""
    out: list[Homework] = []
    for m in sorted(user.memberships, key=lambda m: m.course.code):
        # The student's own gradebook row: the same counted score, override and maximum as the instructor sees.
        book = build_gradebook(m.course, user.id) if m.role == Role.STUDENT.value else None
        row = book.rows[0] if book and book.rows else None
        for ca in m.course.homework:
            if not ca.published and m.role != Role.INSTRUCTOR.value:
                continue
            try:
                assignment = load(ca.assignment_id)
            except AssignmentNotFound:
                continue  # a folder removed from disk: nothing to show or submit
            hw = Homework(m.course, ca, assignment)
            hw.used, hw.pending, hw.best, hw.max_score = attempt_counts(user.id, m.course.id, ca.assignment_id)
            item = book.item(f"hw:{ca.assignment_id}") if book else None
            if item is not None and item.max_score:
                hw.max_score = item.max_score
            if row is not None:
                hw.counted = row.cells.get(f"hw:{ca.assignment_id}")
            if m.role == Role.STUDENT.value and not is_released(m.course.id, f"hw:{ca.assignment_id}"):
                hw.released, hw.best, hw.counted = False, None, None  # graded, not yet released
            hw.extension = db.session.scalar(db.select(Extension.deadline).where(
                Extension.course_assignment_id == ca.id, Extension.user_id == user.id))
            out.append(hw)
    out.sort(key=lambda h: (h.course.code, h.settings.deadline or datetime.max,
                            natural_key(h.assignment.title.get("en") or h.assignment.id), h.assignment.id))
    return out


def homework_or_404(user: User, code: str, assignment_id: str) -> Homework:
    """The homework at ``/homework/<code>/<assignment_id>`` if the user may see it."""
    for hw in homework_for(user):
        if hw.course.code == code and hw.assignment.id == assignment_id:
            return hw
    abort(404)


def upload_refusal(hw: Homework) -> str | None:
    """Why no new submission is accepted right now (in the current language), or None if it is."""
    if hw.past_deadline and hw.settings.late_penalty_per_day <= 0:
        return _("The deadline has passed; no more submissions are accepted.")
    if hw.used >= hw.settings.attempt_limit:
        return _("You have used all %(limit)d attempts.", limit=hw.settings.attempt_limit)
    return None


def elapsed_s(sub: Submission) -> float | None:
    """Seconds since the submission entered the queue while it waits or runs (one clock that does not
    restart at 0:00 when grading starts), or how long grading took once finished."""
    if sub.status in PENDING_STATUSES:
        start, end = sub.enqueued_at or sub.created_at, utcnow()
    else:
        start, end = sub.started_at, sub.finished_at
    if start is None or end is None:
        return None
    return round(max(0.0, (end - start).total_seconds()), 1)
