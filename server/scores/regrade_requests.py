"""Regrade requests per check: "please look at this check again", with a reason.

A student may ask once per check of their own graded submission, while its results are released
(nobody can dispute a score they cannot see) and the course's window is open
(``REGRADE_REQUEST_DAYS`` after the result reached them; 0 turns requests off). The instructor
answers in one of two ways:

* **rerun**: the submission goes back through the normal queue (``actions.regrade``, so the old
  score is kept beside the new one, exactly as any regrade);
* **score**: the check gets new points with a reply. It is stored as a ``ManualCellScore`` of
  cell ``regrade.<check id>`` holding the *difference* from the check's automatic points, so the
  one definition of a submission's counted score (``server.scores.hand_scores``: stored score
  plus hand-given points) counts it on every page, in the gradebook and in the exports, and it
  goes into the audit log like every manual change. A later regrade of the submission clears
  it (``actions.regrade``), because it answered the old reading of the check.

The student sees the state and the reply beside the check on their report.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from flask import current_app
from sqlalchemy import DateTime, Float, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from server.scores import actions, release
from server.extensions import db
from server.scores import events
from server.models import Submission, SubmissionStatus, User, utcnow
from server.scores.models import REGRADE_CELL_PREFIX, AuditEntry, ManualCellScore

MAX_REASON = 1000


class RequestState(str, Enum):
    OPEN = "open"
    RERUN = "rerun"  # answered by grading the submission again
    ANSWERED = "answered"  # answered with new points for the check and a reply


class RegradeRequest(db.Model):
    """One student's request about one check of one submission (once per check)."""

    __table_args__ = (UniqueConstraint("submission_id", "check_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submission.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    check_id: Mapped[str] = mapped_column(String(120))
    reason: Mapped[str] = mapped_column(Text)
    auto_points: Mapped[float] = mapped_column(Float)  # the check's points when asked
    max_points: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(12), default=RequestState.OPEN.value, index=True)
    reply: Mapped[str] = mapped_column(Text, default="")
    new_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    decided_by: Mapped[int | None] = mapped_column(ForeignKey("user.id"), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class RequestError(ValueError):
    """A refused request or answer; ``code`` picks the page's message. Nothing was stored."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def window_days() -> float:
    return float(current_app.config.get("REGRADE_REQUEST_DAYS", 14))


def _check(sub: Submission, check_id: str) -> dict[str, Any] | None:
    return next((c for c in (sub.report_json or {}).get("checks", [])
                 if isinstance(c, dict) and c.get("id") == check_id), None)


def closes_at(sub: Submission) -> datetime | None:
    """Until when its owner may ask about the submission's checks (None: not at all)."""
    item = f"hw:{sub.assignment_id}"
    if window_days() <= 0 or sub.finished_at is None or not release.is_released(sub.course_id, item):
        return None
    state = release.state(sub.course_id, item)
    since = max([sub.finished_at] + [t for t in (state["published_at"], state["releases_at"]) if t])
    return since + timedelta(days=window_days())


def askable(sub: Submission) -> set[str]:
    """Check ids of the stored report its owner may still ask about now (checks worth points)."""
    if sub.status != SubmissionStatus.GRADED.value or sub.review_status is not None:
        return set()
    until = closes_at(sub)
    if until is None or utcnow() > until:
        return set()
    asked = set(for_submission(sub.id))
    # annotation fields have their own "ask the teacher" (server.homework.asking); manual cells are a person's already
    return {c["id"] for c in (sub.report_json or {}).get("checks", [])
            if isinstance(c, dict) and (c.get("max_points") or 0) > 0 and c.get("id") not in asked
            and not str(c.get("id")).startswith(("field.", "manual."))}


def for_submission(submission_id: int) -> dict[str, RegradeRequest]:
    """check id -> request, for the report page."""
    return {r.check_id: r for r in db.session.scalars(
        db.select(RegradeRequest).where(RegradeRequest.submission_id == submission_id))}


def ask(sub: Submission, user_id: int, check_id: Any, reason: Any) -> RegradeRequest:
    """Store the owner's one request about ``check_id``; raises ``RequestError``."""
    if sub.user_id != user_id:
        raise RequestError("not_owner")
    check_id = check_id if isinstance(check_id, str) else ""
    reason = reason.strip() if isinstance(reason, str) else ""
    if check_id in for_submission(sub.id):
        raise RequestError("already_asked")
    if check_id not in askable(sub):
        raise RequestError("not_askable")
    if not reason:
        raise RequestError("empty_reason")
    if len(reason) > MAX_REASON:
        raise RequestError("long_reason")
    check = _check(sub, check_id)
    row = RegradeRequest(course_id=sub.course_id, submission_id=sub.id, user_id=user_id, check_id=check_id,
                         reason=reason, auto_points=round(float(check.get("points") or 0.0), 4),
                         max_points=float(check.get("max_points") or 0.0))
    db.session.add(row)
    try:
        db.session.commit()
    except IntegrityError:  # a second request raced this one
        db.session.rollback()
        raise RequestError("already_asked") from None
    return row


def open_requests(course_id: int) -> list[tuple[RegradeRequest, Submission, str]]:
    """The course's open requests, oldest first, with their submission and the student's username."""
    return [tuple(r) for r in db.session.execute(
        db.select(RegradeRequest, Submission, User.username)
        .join(Submission, Submission.id == RegradeRequest.submission_id).join(User, User.id == RegradeRequest.user_id)
        .where(RegradeRequest.course_id == course_id, RegradeRequest.state == RequestState.OPEN.value)
        .order_by(RegradeRequest.id))]


def _open_or_error(course_id: int, request_id: int) -> RegradeRequest:
    row = db.session.get(RegradeRequest, request_id)
    if row is None or row.course_id != course_id:
        raise RequestError("not_found")
    if row.state != RequestState.OPEN.value:
        raise RequestError("already_answered")
    return row


def answer_with_score(course_id: int, request_id: int, points: Any, reply: Any, actor_id: int) -> RegradeRequest:
    """New points for the check with a reply (audited); counted as a hand-given score."""
    row = _open_or_error(course_id, request_id)
    try:
        new = round(float(points), 4)
    except (TypeError, ValueError):
        raise RequestError("bad_points") from None
    if not 0 <= new <= row.max_points:
        raise RequestError("bad_points")
    reply = reply.strip() if isinstance(reply, str) else ""
    if not reply or len(reply) > MAX_REASON:
        raise RequestError("bad_reply")
    cell = REGRADE_CELL_PREFIX + row.check_id
    db.session.add(ManualCellScore(submission_id=row.submission_id, cell_id=cell, score=round(new - row.auto_points, 4),
                                   max_points=row.max_points, comment=reply, graded_by=actor_id))
    db.session.add(AuditEntry(course_id=course_id, user_id=row.user_id, target=f"sub:{row.submission_id}/{cell}",
                              old=row.auto_points, new=new, reason=reply, actor_id=actor_id))
    row.state, row.new_points, row.reply = RequestState.ANSWERED.value, new, reply
    row.decided_by, row.decided_at = actor_id, utcnow()
    db.session.commit()

    sub = db.session.get(Submission, row.submission_id)
    events.changed(course_id, row.user_id, f"hw:{sub.assignment_id}")
    return row


def answer_with_rerun(course_id: int, request_id: int, reply: Any, actor_id: int) -> str:
    """Grade the submission again through the normal queue; returns the regrade batch id."""
    row = _open_or_error(course_id, request_id)
    sub = db.session.get(Submission, row.submission_id)
    row.state, row.reply = RequestState.RERUN.value, (reply.strip() if isinstance(reply, str) else "")[:MAX_REASON]
    row.decided_by, row.decided_at = actor_id, utcnow()
    return actions.regrade([sub], actor_id)  # commits
