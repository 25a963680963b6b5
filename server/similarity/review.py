"""Opening an integrity review from a similarity pair or cluster.

The students' counted submissions go under review exactly as a grading with integrity events
does (``server.dashboard.integrity``): ``review_status`` becomes ``pending``, the grade counts 0
until an instructor decides, and the computed grade is kept to be restored on *accept*. The
evidence (which run, pair or cluster, with whom, how much shared) is appended to the report's
integrity events, so the review page shows it beside any events of the grading; students see only
that a review is pending. Each opening needs a reason and is audited per student. Each write is
a compare-and-set on the grading the instructor saw (status, run count, review status, score): a
submission regraded meanwhile is left alone and reported as skipped.
"""
from __future__ import annotations

from typing import Any

from server.scores.actions import ActionError, _audit
from server.extensions import db
from server.grading.lifecycle import compare_and_set
from server.models import Submission, SubmissionStatus

GRADED = SubmissionStatus.GRADED.value
MAX_REASON = 2000
MAX_EVENTS = 50  # report integrity events kept (the report has a size cap)


def evidence_text(run_id: int, what: str, score: float, shared: int, others: list[str]) -> str:
    """One line of evidence, as the integrity page shows it (plain text: escaped where shown)."""
    return (f"similarity run #{run_id}, {what}: shares {round(score * 100)}% of its own code "
            f"({shared} tokens beyond the starter and solution) with {', '.join(others)}")[:1000]


def open_reviews(course_id: int, evidence: dict[int, str], reason: str, actor_id: int) -> dict[str, list[int]]:
    """Put each submission of ``evidence`` (id -> evidence line) under integrity review, audited.

    Returns ``{"opened": [...], "added": [...], "skipped": [...]}``: newly pending, already pending
    (the evidence is added), and not a graded submission of this course (nothing written)."""
    reason = (reason or "").strip()[:MAX_REASON]
    if not reason:
        raise ActionError("reason_required")
    out: dict[str, list[int]] = {"opened": [], "added": [], "skipped": []}
    for sid, line in evidence.items():
        sub = db.session.get(Submission, sid)
        if sub is None or sub.course_id != course_id or sub.status != GRADED:
            out["skipped"].append(sid)
            continue
        db.session.refresh(sub)
        values: dict[str, Any] = {"report_json": _with_event(sub.report_json, line)}
        old = sub.score
        fresh = sub.review_status != "pending"  # read before the write: compare_and_set updates ``sub`` too
        if fresh:
            values.update(review_status="pending", review_reason=None, reviewed_by=None, reviewed_at=None, score=0.0,
                          computed_score=sub.computed_score if sub.review_status else sub.score)
        guard = [Submission.status == GRADED, Submission.grading_runs == sub.grading_runs,
                 Submission.review_status.is_(None) if sub.review_status is None else Submission.review_status == sub.review_status,
                 Submission.score.is_(None) if old is None else Submission.score == old]
        if not compare_and_set(sid, guard, **values):
            db.session.rollback()
            out["skipped"].append(sid)
            continue
        _audit(course_id, sub.user_id, f"sub:{sid}/integrity", old, values.get("score", old),
               f"open review (similarity): {reason}", actor_id)
        db.session.commit()
        out["opened" if fresh else "added"].append(sid)
    return out


def _with_event(report: dict | None, line: str) -> dict:
    report = dict(report or {})
    integrity = dict(report.get("integrity") or {}) if isinstance(report.get("integrity"), dict) else {}
    events = [e for e in integrity.get("events") or [] if isinstance(e, dict)]
    events.append({"source": "similarity", "kind": "similarity.match", "rank": None, "run": None, "detail": line})
    integrity["events"] = events[-MAX_EVENTS:]
    report["integrity"] = integrity
    return report
