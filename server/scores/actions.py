"""What an instructor can change: regrade through the normal queue, override a gradebook cell,
grade a free-text cell by hand, grant an extension. Every manual score change is audited.

Regrading keeps the score a submission had in a ``Regrade`` row before putting it back to
``queued`` (``lifecycle.reset_for_regrade``); the worker then grades it exactly as a new upload (same lease, same single
store), so "which scores changed" is a join of ``Regrade`` with the submission afterwards.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from server.scores.models import (REGRADE_CELL_PREFIX, AnnotationReviewRequest, AuditEntry, Extension, ManualCellScore,
                                     Regrade, ScoreOverride)
from server.scores.hand_scores import submission_scores
from server.extensions import db
from server.scores import events
from server.grading import lifecycle
from server.grading.queue import try_enqueue
from server.models import FINISHED_STATUSES, CourseAssignment, Submission, SubmissionStatus, User, utcnow

REGRADE_INLINE = 100  # regraded submissions enqueued inside the request; the reconciler takes the rest


class ActionError(ValueError):
    """A refused change; ``code`` picks the message the page shows."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def decided_submissions(submission_ids: list[int]) -> set[int]:
    """The submissions carrying a teacher's annotation decision (``field.*``), which a regrade
    would clear: it leaves them out unless the teacher says otherwise."""
    if not submission_ids:
        return set()
    return set(db.session.scalars(db.select(ManualCellScore.submission_id).where(
        ManualCellScore.submission_id.in_(submission_ids), ManualCellScore.cell_id.like("field.%"))))


def regrade(subs: list[Submission], actor_id: int, clear_decisions: bool = False) -> str | None:
    """Put finished submissions back in the queue, remembering their scores; returns the batch id
    (None when nothing was put back).

    Submissions still queued or running are left alone (they will be graded by the current
    grader anyway). A submission carrying a teacher's annotation decision is left out too unless
    ``clear_decisions``: regrading clears the decision (it judged the old reading), and the
    teacher must have said so (a regrade once dropped a student's counted score unannounced).
    """
    batch = uuid.uuid4().hex[:12]
    requeued = []
    finished = [s for s in subs if s.status in FINISHED_STATUSES]
    keep = set() if clear_decisions else decided_submissions([s.id for s in finished])
    counted = submission_scores([s.id for s in finished])
    for sub in finished:
        if sub.id in keep:
            continue
        db.session.add(Regrade(batch=batch, submission_id=sub.id, course_id=sub.course_id,
                               assignment_id=sub.assignment_id, old_status=sub.status, old_score=sub.score,
                               old_max_score=sub.max_score, old_counted=counted[sub.id].counted,
                               requested_by=actor_id))
        if lifecycle.reset_for_regrade(sub.id):
            _clear_annotation_decisions(sub, actor_id)
            _clear_regrade_decisions(sub, actor_id)
            requeued.append(sub)
    db.session.commit()
    if not requeued:
        return None
    # A whole class can be thousands of submissions: hand the first ones to Redis now and leave
    # the rest queued in the database, where every worker's reconciler enqueues them within
    # seconds. The web request stays short whatever the class size.
    for sub in requeued[:REGRADE_INLINE]:
        db.session.refresh(sub)
        try_enqueue(sub)  # Redis down: the reconciler enqueues it later
    return batch


def _clear_annotation_decisions(sub: Submission, actor_id: int) -> None:
    """A teacher's decision on an annotation (``field.<path>``) judges one reading of it, which the
    regrade replaces: the field may no longer wait or be asked about, and a decision the report
    cannot show must not count in the gradebook either. Clear the decisions and the students'
    requests (audited); an annotation still unsure after the regrade waits again, and the student
    may ask again."""
    for row in db.session.scalars(db.select(ManualCellScore).where(
            ManualCellScore.submission_id == sub.id, ManualCellScore.cell_id.like("field.%"))):
        _audit(sub.course_id, sub.user_id, f"sub:{sub.id}/{row.cell_id}", row.score, None,
               "regrade: the annotation is read again", actor_id)
        db.session.delete(row)
    db.session.execute(db.delete(AnnotationReviewRequest).where(AnnotationReviewRequest.submission_id == sub.id))


def _clear_regrade_decisions(sub: Submission, actor_id: int) -> None:
    """A regrade replaces the reading a changed check answered: drop its points (audited) so they
    are not added to a new score they were never meant for. The caller commits."""
    for cell in db.session.scalars(db.select(ManualCellScore).where(
            ManualCellScore.submission_id == sub.id, ManualCellScore.cell_id.like(REGRADE_CELL_PREFIX + "%"))):
        _audit(sub.course_id, sub.user_id, f"sub:{sub.id}/{cell.cell_id}", cell.score, None,
               "regrade: the check is graded again", actor_id)
        db.session.delete(cell)


DEFAULT_GRADING_S = 120.0  # assumed per submission before any has been graded


def estimate_seconds(count: int, mean_grading_s: float | None, graders: int) -> float:
    """How long ``count`` submissions take to grade, one at a time on each of ``graders`` workers."""
    per = mean_grading_s if mean_grading_s and mean_grading_s > 0 else DEFAULT_GRADING_S
    return count * per / max(1, graders)


def mean_grading_s(course_id: int, assignment_id: str, last: int = 50) -> float | None:
    """Mean grading time (started -> finished) of the latest graded submissions of a homework."""
    rows = db.session.execute(
        db.select(Submission.started_at, Submission.finished_at)
        .where(Submission.course_id == course_id, Submission.assignment_id == assignment_id,
               Submission.status == SubmissionStatus.GRADED.value, Submission.started_at.is_not(None),
               Submission.finished_at.is_not(None))
        .order_by(Submission.id.desc()).limit(last)).all()
    spans = [(f - s).total_seconds() for s, f in rows if f >= s]
    return sum(spans) / len(spans) if spans else None


def pending_regrades(submission_ids: list[int]) -> dict[int, Regrade]:
    """For submissions put back in the queue by a regrade: the latest ``Regrade`` row (the old result)."""
    if not submission_ids:
        return {}
    out: dict[int, Regrade] = {}
    for r in db.session.scalars(db.select(Regrade).where(Regrade.submission_id.in_(submission_ids))
                                .order_by(Regrade.id)):
        out[r.submission_id] = r
    return out


@dataclass
class RegradeResult:
    """One regraded submission: its status and the score that counts (grader's + hand-given)
    before and now; ``old_score`` / ``score`` are the grader's alone."""

    submission_id: int
    username: str
    old_status: str
    old_score: float | None
    status: str
    score: float | None
    max_score: float | None
    old_counted: float | None = None
    counted: float | None = None

    @property
    def done(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def changed(self) -> bool:
        """The status or the counted score changed (what the gradebook shows, not only the grader's)."""
        return self.done and (self.status != self.old_status or self.score != self.old_score
                              or self.counted != self.old_counted)


def regrade_results(course_id: int, batch: str) -> list[RegradeResult]:
    """Old and current score of every submission in a regrade batch, changed ones first."""
    rows = db.session.execute(
        db.select(Regrade, Submission.status, Submission.score, Submission.max_score, User.username)
        .join(Submission, Submission.id == Regrade.submission_id).join(User, User.id == Submission.user_id)
        .where(Regrade.batch == batch, Regrade.course_id == course_id).order_by(Regrade.submission_id)).all()
    counted = submission_scores([r.submission_id for r, *_ in rows])
    out = [RegradeResult(r.submission_id, username, r.old_status, r.old_score, status, score, top,
                         r.old_score if r.old_counted is None else r.old_counted,  # (rows from before the column)
                         counted[r.submission_id].counted)
           for r, status, score, top, username in rows]
    return sorted(out, key=lambda r: (not r.changed, r.submission_id))


def recent_batches(course_id: int, limit: int = 10) -> list[tuple[str, str, int, datetime]]:
    """(batch, assignment, submissions, when) of the latest regrades, newest first."""
    return db.session.execute(
        db.select(Regrade.batch, Regrade.assignment_id, db.func.count(Regrade.id), db.func.max(Regrade.requested_at))
        .where(Regrade.course_id == course_id).group_by(Regrade.batch, Regrade.assignment_id)
        .order_by(db.func.max(Regrade.requested_at).desc()).limit(limit)).all()


def _audit(course_id: int, user_id: int, target: str, old: float | None, new: float | None,
           reason: str, actor_id: int) -> None:
    db.session.add(AuditEntry(course_id=course_id, user_id=user_id, target=target, old=old, new=new,
                              reason=reason, actor_id=actor_id))


def _score(value: Any, top: float | None = None) -> float:
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise ActionError("bad_score")
    if score != score or score < 0 or (top is not None and score > top):
        raise ActionError("bad_score")
    return score


def set_override(course_id: int, user_id: int, item: str, value: Any, reason: str, actor_id: int,
                 computed: float | None, top: float | None = None) -> ScoreOverride:
    """Replace the computed score of one gradebook cell; the reason is required and audited.

    ``top`` is the item's maximum: a score above it is refused (``above_max``), since every
    total and export is out of that maximum.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("reason_required")
    score = _score(value)
    if top and score > top:
        raise ActionError("above_max")
    row = db.session.scalar(db.select(ScoreOverride).where(
        ScoreOverride.course_id == course_id, ScoreOverride.user_id == user_id, ScoreOverride.item == item))
    old = row.score if row else computed
    if row is None:
        row = ScoreOverride(course_id=course_id, user_id=user_id, item=item)
        db.session.add(row)
    row.score, row.reason, row.set_by, row.set_at = score, reason, actor_id, utcnow()
    _audit(course_id, user_id, item, old, score, reason, actor_id)
    db.session.commit()
    events.changed(course_id, user_id, item)
    return row


def clear_override(course_id: int, user_id: int, item: str, reason: str, actor_id: int,
                   computed: float | None) -> None:
    """Go back to the computed score (audited, with the reason)."""
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("reason_required")
    row = db.session.scalar(db.select(ScoreOverride).where(
        ScoreOverride.course_id == course_id, ScoreOverride.user_id == user_id, ScoreOverride.item == item))
    if row is None:
        return
    _audit(course_id, user_id, item, row.score, computed, reason, actor_id)
    db.session.delete(row)
    db.session.commit()
    events.changed(course_id, user_id, item)


def manual_cells(report: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Cells a grader left for a person: ``evidence.manual_cells`` of any check, in report order."""
    cells = []
    for check in (report or {}).get("checks", []):
        for cell in (check.get("evidence") or {}).get("manual_cells") or []:
            if isinstance(cell, dict) and cell.get("cell_id"):
                cells.append({"cell_id": str(cell["cell_id"]), "max_points": float(cell.get("max_points") or 0),
                              "source": str(cell.get("source") or ""), "check_id": check.get("id")})
    return cells


def set_cell_score(sub: Submission, cell_id: str, value: Any, comment: str, actor_id: int) -> ManualCellScore:
    """Store the hand-given score of one manual cell (0..max_points), audited."""
    cell = next((c for c in manual_cells(sub.report_json) if c["cell_id"] == cell_id), None)
    if cell is None:
        raise ActionError("no_such_cell")
    score = _score(value, cell["max_points"])
    row = db.session.scalar(db.select(ManualCellScore).where(
        ManualCellScore.submission_id == sub.id, ManualCellScore.cell_id == cell_id))
    old = row.score if row else None
    if row is None:
        row = ManualCellScore(submission_id=sub.id, cell_id=cell_id)
        db.session.add(row)
    row.score, row.max_points, row.comment, row.graded_by = score, cell["max_points"], comment.strip(), actor_id
    row.graded_at = utcnow()
    _audit(sub.course_id, sub.user_id, f"sub:{sub.id}/cell:{cell_id}", old, score,
           comment.strip() or "manual grading", actor_id)
    db.session.commit()
    events.changed(sub.course_id, sub.user_id, f"hw:{sub.assignment_id}")
    return row


def cell_scores(submission_id: int) -> dict[str, ManualCellScore]:
    return {r.cell_id: r for r in db.session.scalars(
        db.select(ManualCellScore).where(ManualCellScore.submission_id == submission_id))}


def set_extension(ca: CourseAssignment, user_id: int, deadline: datetime, reason: str, actor_id: int) -> Extension:
    """Give one student a later deadline for one homework (replacing an earlier extension)."""
    row = db.session.scalar(db.select(Extension).where(
        Extension.course_assignment_id == ca.id, Extension.user_id == user_id))
    if row is None:
        row = Extension(course_assignment_id=ca.id, user_id=user_id)
        db.session.add(row)
    row.deadline, row.reason, row.granted_by = deadline, reason.strip(), actor_id
    db.session.commit()
    events.changed(ca.course_id, user_id, f"hw:{ca.assignment_id}")  # a later deadline can lift a late penalty
    return row


def update_settings(ca: CourseAssignment, *, deadline: datetime | None, attempt_limit: int,
                    late_penalty_per_day: float, score_policy: str) -> None:
    """Change a homework's rules; the gradebook recomputes from them on its next view."""
    if attempt_limit < 1 or not 0 <= late_penalty_per_day <= 1 or score_policy not in ("best", "last"):
        raise ActionError("bad_settings")
    ca.deadline, ca.attempt_limit = deadline, attempt_limit
    ca.late_penalty_per_day, ca.score_policy = late_penalty_per_day, score_policy
    db.session.commit()
    events.changed(ca.course_id, item=f"hw:{ca.assignment_id}")  # every student's counted score may move
