""""I think this is right — ask the teacher" for homework 2's auto-graded annotations.

The annotation reader is right only about two times in three on fresh answers, so a student
may ask a teacher to look at any auto-graded ``field.<path>`` check of their own graded
submission, once per answer, with a comment. The request stores the points the field counted
when asked (``auto_points``); the teacher's decision (a ``ManualCellScore`` of the same cell,
``server.dashboard.review_annotation.decide``) replaces them: the report shows the teacher's
points (``merge_manual_scores`` with ``asked``) and every score (page, gradebook, exports) adds
the decision minus ``auto_points`` by one definition, ``server.scores.hand_scores``.

On the notebook route the fields are counted inside part C (``counted_in``): what is at stake
is the field's share of part C (``counted_points`` of ``counted_max``), the decision replaces that
share and part C is restated (``coursework.report._settle_waiting``). A field whose part C
counted nothing in the run cannot be asked (``askable_field`` says no).
"""
from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from coursework.report import askable_field
from server.extensions import db
from server.models import Submission, SubmissionStatus, utcnow
from server.scores.models import AnnotationReviewRequest
from server.scores.models import ManualCellScore

# server.dashboard imports the homework views, which import this module: its models are read
# inside the functions (as the views do with the gradebook).

MAX_COMMENT = 1000


class AskError(ValueError):
    """Why a request was refused (``code`` picks the page's message); nothing was stored."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def requests_for(submission_id: int) -> dict[str, Any]:
    """check id -> the student's request (``AnnotationReviewRequest``) on this submission."""
    return {r.check_id: r for r in db.session.scalars(
        db.select(AnnotationReviewRequest).where(AnnotationReviewRequest.submission_id == submission_id))}


def askable_checks(sub: Submission) -> set[str]:
    """The field checks of the stored report the owner may still ask about (none unless the
    submission is graded and counts as graded)."""
    if sub.status != SubmissionStatus.GRADED.value or sub.review_status is not None:
        return set()
    report = sub.report_json or {}
    if report.get("status", "graded") != "graded":
        return set()
    asked = set(requests_for(sub.id))
    decided = {r for (r,) in db.session.execute(
        db.select(ManualCellScore.cell_id).where(ManualCellScore.submission_id == sub.id))}
    return {c["id"] for c in report.get("checks", [])
            if isinstance(c, dict) and askable_field(c) and c["id"] not in asked | decided}


def ask(sub: Submission, user_id: int, check_id: str, comment: Any) -> Any:
    """Store the owner's one request about ``check_id`` of ``sub``; raises ``AskError``."""
    if sub.user_id != user_id:
        raise AskError("not_owner")
    comment = comment.strip() if isinstance(comment, str) else ""
    check_id = check_id if isinstance(check_id, str) else ""
    if check_id in requests_for(sub.id):
        raise AskError("already_asked")
    if check_id not in askable_checks(sub):
        raise AskError("not_askable")
    if not comment:
        raise AskError("empty_comment")
    if len(comment) > MAX_COMMENT:
        raise AskError("long_comment")
    check = next(c for c in sub.report_json["checks"] if c.get("id") == check_id)
    row = AnnotationReviewRequest(submission_id=sub.id, check_id=check_id, user_id=user_id, comment=comment,
                                  auto_points=round(float(check.get("points") or 0.0), 4), created_at=utcnow())
    db.session.add(row)
    try:
        db.session.commit()
    except IntegrityError:  # a second request raced this one: once per answer
        db.session.rollback()
        raise AskError("already_asked") from None
    return row
