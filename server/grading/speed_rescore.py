"""Gradings whose speed was "pending calibration", re-scored when this host's calibration lands.

A grading never waits for the reference solution to be measured: without an
accepted calibration its speed check is "pending calibration" and keeps the measured pairs. When
the worker's calibration thread accepts a value, ``rescore_pending`` recomputes that one check
(``graders.ddp_speedup.grader.rescore``) for every such report of the assignment on this host's mode; the
student's code does not run again. Each write is a compare-and-set on the row's ``finished_at``,
so a regrading stored meanwhile is never overwritten by the re-score of its predecessor.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import String, cast, select

from coursework.assignments import load
from server.scores import provisional_fields
from server.extensions import db
from server.grading.lifecycle import compare_and_set
from server.models import Submission, SubmissionStatus

MARK = '"pending_calibration"'  # the speed check's key in a stored report awaiting calibration


def rescore_pending(assignment_id: str, mode: str, ref: dict[str, Any]) -> int:
    """Re-score every graded report of ``assignment_id`` in ``mode`` whose speed awaits calibration; returns how many."""
    from graders.ddp_speedup.grader import rescore

    assignment = load(assignment_id)
    rows = db.session.execute(
        select(Submission.id, Submission.finished_at).where(
            Submission.assignment_id == assignment_id, Submission.mode == mode,
            Submission.status == SubmissionStatus.GRADED.value,
            cast(Submission.report_json, String).like(f"%{MARK}%"))).all()
    done = 0
    for sid, finished_at in rows:
        report = db.session.get(Submission, sid).report_json or {}
        new = rescore(report, assignment, ref)
        if new is None:
            continue
        review = new.get("status") == "needs_review"
        values: dict[str, Any] = {"report_json": new, "max_score": new.get("max_score")}
        if review:  # held for an integrity review: the score stays 0, the held score follows the re-score
            values["computed_score"] = (new.get("integrity") or {}).get("computed_score")
        else:
            values["score"] = new.get("score")
        if compare_and_set(sid, [Submission.status == SubmissionStatus.GRADED.value,
                                 Submission.finished_at == finished_at], **values):
            provisional_fields.sync(sid, new)
            done += 1
        db.session.commit()
    return done
