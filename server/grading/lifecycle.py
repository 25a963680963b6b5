"""What can happen to a submission: the moves between its statuses, each one compare-and-set.

::

    (upload) --create_queued--> queued --mark_enqueued--> queued, handed to RQ as job g+1
    queued (or running, lease expired) --claim--> running --renew--> running (lease extended)
    running --report_progress--> running (the status page's snapshot)
    running --store_report--> graded | error (the grader's own crash)
    running --fail_infra--> queued (retried once) | error; never counts as an attempt
    running, lease expired --recover_expired--> fail_infra, for a worker that died
    queued | running --replace--> replaced (a newer upload took its place)
    graded | error --reset_for_regrade--> queued

Every move is one ``UPDATE ... WHERE`` guarded by the state its caller believes the row is in
(the status, and for a running submission the lease's run token), through ``compare_and_set``.
Two processes that race for one move get one winner; the loser's update matches no row and the
move says so (``False``, ``None`` or ``"superseded"``). That is what makes grading exactly-once:
only the run holding the token stores a report, and a replaced or recovered run cannot.

No RQ here: ``server.grading.queue`` hands submissions to RQ after the moves that need it.
Moves commit, except ``replace`` and ``reset_for_regrade`` (a step of the caller's transaction).
"""
from __future__ import annotations

import os
import uuid
from datetime import datetime, timedelta
from typing import Any, Iterable

from flask import current_app
from sqlalchemy import ColumnElement, func, or_, update

from server.extensions import db
from server.models import FINISHED_STATUSES, PENDING_STATUSES, Submission, SubmissionStatus, utcnow
from server.scores import provisional_fields

QUEUED, RUNNING = SubmissionStatus.QUEUED.value, SubmissionStatus.RUNNING.value
GRADED, ERROR = SubmissionStatus.GRADED.value, SubmissionStatus.ERROR.value

# How often each worker's reconciler passes (server.grading.reconcile); the status page's "retried in about N s".
RECONCILE_EVERY_S = float(os.environ.get("RECONCILE_EVERY_S", "5"))

# The columns each move of a grading run may write (a test holds every move to its list).
CLAIM_WRITES = ("status", "run_token", "started_at", "lease_until", "grading_runs", "progress_json")
STORE_WRITES = ("status", "finished_at", "report_json", "lease_until", "results_stored", "error_detail",
                "progress_json", "score", "max_score", "review_status", "review_reason", "reviewed_by",
                "reviewed_at", "computed_score")
INFRA_WRITES = ("status", "run_token", "lease_until", "error_detail", "infra_retries", "finished_at",
                "progress_json")
PROGRESS_WRITES = ("progress_json",)
# A regrade puts a submission back as a fresh upload: it clears every column a run writes but these.
KEPT_BY_REGRADE = {
    "grading_runs": "counts every grader start in the submission's life",
    "report_json": "the previous report stays readable until the new run stores its own",
    "max_score": "goes with the previous report",
    "review_status": "an integrity decision stands until the new report (store_report writes all five)",
    "review_reason": "as review_status", "reviewed_by": "as review_status", "reviewed_at": "as review_status",
    "computed_score": "as review_status",
}
INFRA_DETAIL_LOST_WORKER = "worker lost (its lease expired); not counted as an attempt"


def compare_and_set(submission_id: int, guard: Iterable[ColumnElement[bool]], **values: Any) -> bool:
    """Write ``values`` to the submission if its row still matches every ``guard``; True if it did.

    The one way a status changes. It does not commit: the named moves below decide that.
    """
    stmt = update(Submission).where(Submission.id == submission_id, *guard).values(**values)
    return bool(db.session.execute(stmt).rowcount)


def lease_deadline() -> datetime:
    """When a lease taken or renewed now expires (``LEASE_S`` from now)."""
    return utcnow() + timedelta(seconds=current_app.config["LEASE_S"])


def heartbeat_interval() -> float:
    """Seconds between a running job's lease renewals: a few beats per lease, and at most 5 s, so
    the status page can tell a silent host (``host_lost``) long before the lease runs out."""
    return max(1.0, min(5.0, current_app.config["LEASE_S"] / 6))


def host_lost(sub: Any, now: datetime | None = None) -> int | None:
    """For a running submission whose worker stopped renewing its lease (three beats missed, or the
    lease already over): about how many seconds until a reconciler retries it. None while the
    host is heard from, or when the submission is not running.

    ``sub`` is a ``Submission`` or a row with ``status`` and ``lease_until``. Each renewal sets
    ``lease_until`` to ``LEASE_S`` ahead, so the last beat was ``lease_until - LEASE_S``.
    """
    if sub.status != RUNNING or sub.lease_until is None:
        return None
    now = now or utcnow()
    lease_s = current_app.config["LEASE_S"]
    silent_s = (now - (sub.lease_until - timedelta(seconds=lease_s))).total_seconds()
    if silent_s <= 3 * heartbeat_interval() + 2 and sub.lease_until > now:
        return None
    return round(max(0.0, (sub.lease_until - now).total_seconds()) + RECONCILE_EVERY_S)


def create_queued(sub: Submission, queued_since: datetime) -> None:
    """Add a new upload as ``queued``, waiting since ``queued_since`` (flushed, not committed)."""
    sub.status = QUEUED
    sub.queued_since = queued_since
    sub.enqueued_at = utcnow()  # the student's clock (``elapsed_s``) starts now, not at the hand-over to RQ
    db.session.add(sub)
    db.session.flush()


def note_waiting(submission_id: int) -> bool:
    """Start the clock of the fair queue for a submission that has none yet (a regrade, say)."""
    won = compare_and_set(submission_id, [Submission.queued_since.is_(None)], queued_since=utcnow())
    db.session.commit()
    return won


def mark_enqueued(sub: Submission) -> str | None:
    """Take the next job id (``sub-<id>-g<gen+1>``) of a queued submission; None if another process
    took it first or the submission is no longer queued. The caller hands that job to RQ."""
    gen = sub.enqueue_gen
    job_id = f"sub-{sub.id}-g{gen + 1}"
    # The student's clock (``elapsed_s``) runs from when the submission entered the queue (set by
    # ``create_queued`` and ``reset_for_regrade``): a retry after an infrastructure failure, or a
    # job Redis lost, is handed over again without restarting it.
    won = compare_and_set(sub.id, [Submission.enqueue_gen == gen, Submission.status == QUEUED],
                          enqueue_gen=gen + 1, job_id=job_id,
                          enqueued_at=func.coalesce(Submission.enqueued_at, utcnow()))
    db.session.commit()
    return job_id if won else None


def claim(submission_id: int) -> str | None:
    """Take the lease of a queued submission (or of a running one whose lease expired).

    Returns the run token the other moves of this run need, or None if it is not to be run.
    """
    token = uuid.uuid4().hex
    now = utcnow()
    won = compare_and_set(
        submission_id, [or_(Submission.status == QUEUED, (Submission.status == RUNNING) & (Submission.lease_until < now))],
        status=RUNNING, run_token=token, started_at=now, lease_until=lease_deadline(),
        grading_runs=Submission.grading_runs + 1, progress_json={"phase": "starting", "logs": {}})
    db.session.commit()
    return token if won else None


def renew(submission_id: int, token: str) -> bool:
    """Extend the lease of the run holding ``token``; False: it lost the lease and should stop."""
    won = compare_and_set(submission_id, [Submission.status == RUNNING, Submission.run_token == token],
                          lease_until=lease_deadline())
    db.session.commit()
    return won


def report_progress(submission_id: int, token: str, progress: dict[str, Any]) -> bool:
    """Write the run's progress snapshot, as ``renew`` guards it: only the run holding ``token``.

    False: the run lost its lease (expired and claimed again, replaced, stored) and must not
    overwrite the owner's progress; it should stop."""
    won = compare_and_set(submission_id, [Submission.status == RUNNING, Submission.run_token == token],
                          progress_json=progress)
    db.session.commit()
    return won


def store_report(submission_id: int, token: str, report: dict[str, Any]) -> str:
    """Store a run's report once: only the run holding ``token`` can.

    Returns "graded", "crashed" (the grader reported its own crash: ``error``, staff see the
    traceback) or "superseded" (the run no longer holds the lease; nothing was written).
    """
    crashed = report.get("status") == "error"
    values: dict[str, Any] = dict(
        status=ERROR if crashed else GRADED,
        finished_at=utcnow(), report_json=report, lease_until=None,
        results_stored=Submission.results_stored + 1,
        error_detail=report.get("staff_traceback") if crashed else None,
        progress_json={"phase": "done", "logs": {}},
    )
    if not crashed:
        values.update(score=report.get("score"), max_score=report.get("max_score"))
    review = report.get("status") == "needs_review"  # integrity events: 0 until an instructor decides
    values.update(review_status="pending" if review else None, review_reason=None, reviewed_by=None, reviewed_at=None,
                  computed_score=(report.get("integrity") or {}).get("computed_score") if review else None)
    won = compare_and_set(submission_id, [Submission.status == RUNNING, Submission.run_token == token], **values)
    if won:  # homework 2's waiting annotations follow the report they came from (a bulk write: no ORM event)
        provisional_fields.sync(submission_id, report)
    db.session.commit()
    return ("crashed" if crashed else "graded") if won else "superseded"


def fail_infra(submission_id: int, token: str | None, detail: str, *, expired_before: datetime | None = None) -> str:
    """An infrastructure failure of the run holding ``token``: back to the queue while it has
    retries left (``MAX_INFRA_RETRIES``, one by default), then ``error``. Never an attempt.

    ``expired_before``: only if the lease also expired before then (the reconciler's guard: a
    run whose heartbeat renewed the lease meanwhile is alive). Returns "retrying" (the caller
    hands it to RQ), "error", or "superseded" (the run no longer holds the lease).
    """
    guard = [Submission.status == RUNNING, Submission.run_token == token]
    if expired_before is not None:
        guard.append(Submission.lease_until < expired_before)
    retries = db.session.scalar(db.select(Submission.infra_retries).where(Submission.id == submission_id, *guard))
    if retries is None:
        return "superseded"
    retry = retries < current_app.config["MAX_INFRA_RETRIES"]
    values: dict[str, Any] = dict(run_token=None, lease_until=None, error_detail=detail)
    # The lost run's phase is not the submission's any more: a retry starts its phases afresh
    # (claim writes "starting"), and a final error shows no running phase.
    if retry:
        values.update(status=QUEUED, infra_retries=retries + 1, progress_json=None)
    else:
        values.update(status=ERROR, finished_at=utcnow(), progress_json={"phase": "done", "logs": {}})
    won = compare_and_set(submission_id, guard, **values)
    db.session.commit()
    if not won:
        return "superseded"
    return "retrying" if retry else "error"


def recover_expired(now: datetime | None = None) -> dict[int, str]:
    """Every running submission whose lease expired lost its worker: ``fail_infra`` for each.

    Returns submission id -> outcome ("retrying" ones are for the caller to hand to RQ).
    """
    now = now or utcnow()
    expired = db.session.execute(db.select(Submission.id, Submission.run_token).where(
        Submission.status == RUNNING, Submission.lease_until < now)).all()
    return {sid: fail_infra(sid, token, INFRA_DETAIL_LOST_WORKER, expired_before=now) for sid, token in expired}


def replace(ids: Iterable[int], by: int) -> list[int]:
    """Mark pending submissions as replaced by the newer upload ``by``; returns those it changed.

    A replaced one never runs, and a running one loses its lease (its heartbeat notices).
    Not committed: a step of the upload's transaction.
    """
    return [i for i in ids if compare_and_set(
        i, [Submission.status.in_(PENDING_STATUSES)], status=SubmissionStatus.REPLACED.value, replaced_by=by,
        run_token=None, lease_until=None, finished_at=utcnow(), progress_json=None)]


def regrade_reset() -> dict[str, Any]:
    """The values ``reset_for_regrade`` writes: each column a run writes, but ``KEPT_BY_REGRADE``,
    back to what a fresh upload has (the column's default, else NULL)."""
    names = sorted(set(CLAIM_WRITES + STORE_WRITES + INFRA_WRITES + PROGRESS_WRITES) - {"status"}
                   - set(KEPT_BY_REGRADE))
    columns = Submission.__table__.c
    return {n: columns[n].default.arg if columns[n].default is not None else None for n in names}


def reset_for_regrade(submission_id: int) -> bool:
    """Put a finished submission back in the queue to be graded as if new; False if it is not
    finished (still queued or running: the current grader grades it anyway). Not committed.
    The student's clock starts afresh (``enqueued_at``): a regrade waits as a new upload does."""
    return compare_and_set(submission_id, [Submission.status.in_(FINISHED_STATUSES)], status=QUEUED,
                           enqueued_at=utcnow(), **regrade_reset())
