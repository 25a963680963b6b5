"""Repair what Redis or a worker lost; every worker runs this every few seconds.

The database is the truth, so repair is a read of it: a running submission whose lease expired
lost its worker (``lifecycle.recover_expired``: an infrastructure failure, retried once, never an
attempt), and a queued one whose job Redis no longer holds (a Redis restart, a dropped job) is
handed to RQ again in fair order. Safe to run concurrently from every worker: each step is a
compare-and-set, so two reconcilers never enqueue one submission twice.
"""
from __future__ import annotations

from server.extensions import db
from server.grading import lifecycle
from server.grading.queue import dispatch, enqueue
from server.models import Submission, SubmissionStatus

RECONCILE_EVERY_S = lifecycle.RECONCILE_EVERY_S  # each worker's pass (the lease arithmetic lives in lifecycle)


def reconcile() -> list[int]:
    """Re-enqueue submissions whose job is gone; recover those whose worker died.

    Returns the ids it handed to RQ.
    """
    requeued: list[int] = []
    for sid, outcome in lifecycle.recover_expired().items():
        # The old job may still sit in RQ's started registry: it is dead by its lease, so enqueue anew.
        if outcome == "retrying":
            sub = db.session.get(Submission, sid)
            db.session.refresh(sub)
            if enqueue(sub):
                requeued.append(sid)

    # Everything else waiting is handed to RQ in fair order, a few at a time per queue.
    resources = db.session.scalars(db.select(Submission.resource).where(
        Submission.status == SubmissionStatus.QUEUED.value).distinct()).all()
    for resource in resources:
        requeued += dispatch(resource)
    return requeued
