"""What hand-given scores add to a submission's stored score: defined once, here.

Three kinds of score are given by hand (``ManualCellScore`` rows): a manual cell a grader left for
a person (``manual.<cell>``: it held 0 points, the score is added), an annotation the reading was
unsure of (``field.<path>`` waiting with 0 points: the decision is added) and an annotation the
student asked about (``AnnotationReviewRequest``: the field already counted ``auto_points``, which
the decision *replaces*, so it adds the decision minus them). While a submission counts 0 for an
integrity review (``review_status`` pending or rejected) they add nothing: its page says it counts
0 points, and a teacher's cell score must not lift it.

The number is one SQL expression (``counted_score`` over ``added_points_table``): the gradebook
aggregates it over a whole course in its grouped query, and ``submission_scores`` reads the same
expression for single submissions (the student's report page, the attempt list, the Gradescope
export, the JSON-lines archive). ``merged_report`` is for *display* only: the stored report with the
teacher's points and comments on its checks (``coursework.report.merge_manual_scores``); pages
show its checks and take the total from here. It lives in the dashboard package, beside the tables
it reads, and imports no view module (the homework views import it inside their functions,
because ``server.dashboard`` imports the homework views).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, func, literal, or_, true, union_all

from coursework.report import merge_manual_scores
from server.scores.models import AnnotationReviewRequest, ManualCellScore, ProvisionalField
from server.extensions import db
from server.models import Course, Submission

log = logging.getLogger(__name__)

# Integrity review states in which a submission counts 0 points (``server.dashboard.integrity``).
COUNTS_ZERO = ("pending", "rejected")


def added_points_table():
    """Subquery ``(sid, pts, unconfirmed, waiting)`` per submission with hand-given scores or homework-2
    annotations waiting for a teacher: what the hand-given scores add before the integrity rule (a
    decision on an asked field counts minus the field's ``auto_points``), and the suggested points and
    number of the annotations no teacher has decided yet (``ProvisionalField`` without a decision)."""
    asked = AnnotationReviewRequest
    pts = ManualCellScore.score - func.coalesce(asked.auto_points, 0.0)
    given = (db.select(ManualCellScore.submission_id.label("sid"), pts.label("pts"), literal(0.0).label("unconfirmed"),
                       literal(0).label("waiting"))
             .outerjoin(asked, and_(asked.submission_id == ManualCellScore.submission_id,
                                    asked.check_id == ManualCellScore.cell_id)))
    decided = ManualCellScore.__table__.alias("decided")
    open_ = (db.select(ProvisionalField.submission_id.label("sid"), literal(0.0).label("pts"),
                       ProvisionalField.provisional.label("unconfirmed"), literal(1).label("waiting"))
             .outerjoin(decided, and_(decided.c.submission_id == ProvisionalField.submission_id,
                                      decided.c.cell_id == ProvisionalField.check_id))
             .where(decided.c.id.is_(None)))
    both = union_all(given, open_).subquery()
    return (db.select(both.c.sid, func.sum(both.c.pts).label("pts"), func.sum(both.c.unconfirmed).label("unconfirmed"),
                      func.sum(both.c.waiting).label("waiting"))
            .group_by(both.c.sid).subquery())


def added_points(added):
    """SQL: what hand-given scores add to the ``Submission`` row they are joined with (outer join
    ``added.c.sid == Submission.id``): nothing while it counts 0 or has no score.

    No hand-given points is tested first: for the many submissions without any, the database
    then never reads ``review_status``, which is not in the gradebook's covering index (SQLite
    defers the table lookup of a row until a column outside the index is needed, and a
    submission row carries its upload). Same value as testing the integrity rule first."""
    return case((added.c.pts.is_(None), 0.0),
                (_adds_nothing(), 0.0),
                (added.c.unconfirmed > 0, added.c.pts + case((_counts_unconfirmed(), added.c.unconfirmed), else_=0.0)),
                else_=added.c.pts)


def _adds_nothing():
    """SQL: the submission has no score or counts 0 for an integrity review: hand-given points add nothing."""
    return or_(Submission.score.is_(None), Submission.review_status.in_(COUNTS_ZERO))


def _counts_unconfirmed():
    """SQL: does the submission's course count verdicts no teacher confirmed (``Course.count_unconfirmed``)?
    Read only for the few submissions with waiting annotations."""
    return (db.select(Course.count_unconfirmed).where(Course.id == Submission.course_id)
            .correlate(Submission).scalar_subquery() == true())


def unconfirmed_points(added):
    """SQL: of ``added_points``, the suggested points of annotations no teacher decided (0 unless the
    course counts them)."""
    return case((added.c.unconfirmed.is_(None), 0.0), (added.c.unconfirmed <= 0, 0.0),
                (_adds_nothing(), 0.0),
                (_counts_unconfirmed(), added.c.unconfirmed), else_=0.0)


def waiting_annotations(added):
    """SQL: how many annotations of the submission wait for a teacher."""
    return func.coalesce(added.c.waiting, 0)


def counted_score(added):
    """SQL: the submission's score that counts, its stored score plus ``added_points`` (NULL when
    it has no score, e.g. a grading error)."""
    return Submission.score + added_points(added)


@dataclass(frozen=True, slots=True)
class SubmissionScore:
    """One submission's numbers: ``stored`` (the grader's), ``added`` (by hand, plus unconfirmed
    suggestions where the course counts them) and ``counted``; ``waiting``: annotations no teacher
    decided yet, ``unconfirmed``: of ``counted``, their suggested points (0 unless counted)."""

    stored: float | None
    added: float
    counted: float | None
    waiting: int = 0
    unconfirmed: float = 0.0


def submission_scores(submission_ids: list[int]) -> dict[int, SubmissionScore]:
    """Submission id -> its ``SubmissionScore``, by the gradebook's own expression (one query)."""
    if not submission_ids:
        return {}
    added = added_points_table()
    rows = db.session.execute(
        db.select(Submission.id, Submission.score, added_points(added), counted_score(added),
                  waiting_annotations(added), unconfirmed_points(added))
        .outerjoin(added, added.c.sid == Submission.id).where(Submission.id.in_(submission_ids)))
    return {sid: SubmissionScore(stored, round(float(plus or 0.0), 4), None if total is None else round(total, 4),
                                 int(waiting or 0), round(float(unconf or 0.0), 4))
            for sid, stored, plus, total, waiting, unconf in rows}


def submission_score(sub: Submission) -> SubmissionScore:
    """``submission_scores`` of one submission."""
    return submission_scores([sub.id]).get(sub.id) or SubmissionScore(sub.score, 0.0, sub.score)


def merged_report(submission_id: int, report: dict[str, Any]) -> dict[str, Any]:
    """The stored report as the student should see it: checks given points by hand carry them and
    the teacher's comment (asked fields say their automatic points were replaced). For display:
    the total comes from ``submission_scores``. A cell the report no longer has (it was regraded)
    leaves the report as graded, logged."""
    rows = list(db.session.scalars(db.select(ManualCellScore).where(ManualCellScore.submission_id == submission_id)))
    # a regrade request's answer ("regrade.<check>", server.scores.regrade_requests) is a difference of
    # points, not a manual cell: its check carries the points it counts (``with_regrade_answers``)
    report = with_regrade_answers(report, {r.cell_id.removeprefix("regrade."): r.score for r in rows
                                           if r.cell_id.startswith("regrade.")})
    scores = {r.cell_id: r for r in rows if not r.cell_id.startswith("regrade.")}
    if not scores or not any(str(c.get("id", "")).startswith(("manual.", "field."))
                             for c in report.get("checks", [])):
        return report
    asked = set(db.session.scalars(db.select(AnnotationReviewRequest.check_id).where(
        AnnotationReviewRequest.submission_id == submission_id)))
    try:
        return merge_manual_scores(report, {cid: {"score": r.score, "comment": r.comment, "asked": cid in asked}
                                            for cid, r in scores.items()})
    except ValueError:
        log.warning("manual scores of submission %s do not match its report", submission_id)
        return report


def with_regrade_answers(report: dict[str, Any], differences: dict[str, float]) -> dict[str, Any]:
    """A copy of ``report`` whose checks a teacher re-scored on a regrade request carry the points
    that count (their automatic points plus the stored difference, within 0..max) and a status
    to match, with ``regraded`` = {"was", "now", "max"}; ``report["regraded"]`` lists them for the
    summary. The report itself when there are none."""
    if not differences:
        return report
    out = json.loads(json.dumps(report))
    changed = []
    for c in out.get("checks", []):
        diff = differences.get(str(c.get("id")))
        if diff is None or not isinstance(c, dict):
            continue
        top = float(c.get("max_points") or 0.0)
        was = float(c.get("points") or 0.0)
        now = round(min(top, max(0.0, was + float(diff))), 4)
        c["points"], c["regraded"] = now, {"was": was, "now": now, "max": top}
        c["status"] = "pass" if top and now >= top else ("fail" if now <= 0 else "warn")
        changed.append({"title": c.get("title"), "was": was, "now": now, "max": top})
    out["regraded"] = changed
    return out


__all__ = ["SubmissionScore", "added_points", "added_points_table", "counted_score", "merged_report",
           "submission_score", "submission_scores", "unconfirmed_points", "waiting_annotations", "with_regrade_answers"]
