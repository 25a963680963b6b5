"""The grading queue: RQ on Redis, one queue per resource class, fed fairly from the database.

The database is the source of truth. A submission is committed before it is
queued; the RQ job carries only its id. Job ids are ``sub-<id>-g<gen>`` and
``enqueue_gen`` is advanced with a compare-and-set, so two processes that try
to enqueue the same submission produce one job. ``reconcile`` repairs what Redis
or a worker lost (a Redis restart, a SIGKILLed worker) and is safe to run
concurrently from every worker.

Order is decided here, not by RQ: a queued submission waits in the database and
``dispatch`` hands RQ only the next few (``QUEUE_DEPTH`` per queue) in the fair
order of ``server.grading.fairness`` (first gradings before regrades, fewest recent gradings
first). Dispatch runs on upload, when a job starts and ends, and in every worker's
reconciler, so RQ's own FIFO is never more than a few jobs deep. A student has at
most one pending submission per assignment: ``submit`` replaces a waiting (or
running) one with a compare-and-set, and a replaced one is never graded.

The moves of a submission's status are ``server.grading.lifecycle``'s; this module adds RQ.
``server.grading.reconcile`` repairs what Redis or a worker lost.
"""
from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

import redis
from flask import current_app
from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from sqlalchemy import func

from server.extensions import db
from server.grading import fairness, lifecycle
from server.grading.workers import live_workers
from server.models import FINISHED_STATUSES, PENDING_STATUSES, Submission, SubmissionStatus, utcnow
from server.redis_skip import REDIS_SKIP_S, RedisAway, redis_failed, redis_recovered, skipping  # noqa: F401 (callers import them here)
from server.scores.models import Regrade

# The job RQ runs, by dotted path. Jobs enqueued under the old path (``server.tasks.grade_submission``)
# before this package existed fail to import in an upgraded worker; that is safe: the submission is
# still ``queued`` in the database, so the reconciler hands it to RQ again under this path
# (tests/server/grading/test_queue.py shows it).
TASK = "server.grading.task.grade_submission"
_connections: dict[tuple[str, float], redis.Redis] = {}
QUEUE_DEPTH = int(os.environ.get("QUEUE_DEPTH", "2"))  # jobs handed to RQ ahead of the workers, per queue
RECENT_S = int(os.environ.get("FAIR_RECENT_S", "3600"))  # window for "gradings started recently"
_WAITING = {JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED}
# A worker claims its submission within milliseconds of RQ starting the job; a queued submission
# whose job reads "started" for longer lost that worker (RQ cleans its registry only minutes later).
CLAIM_GRACE_S = 60.0


def redis_conn() -> redis.Redis:
    """A Redis connection for the configured ``REDIS_URL`` (one pool per URL).

    Raises ``RedisAway`` at once for ``REDIS_SKIP_S`` after a call failed (``redis_failed``), so
    a Redis that hangs costs a page one timed-out call, not one per call of every request.
    """
    url = current_app.config["REDIS_URL"]
    if not url:
        raise RuntimeError("REDIS_URL is not set: start the service with ./distgrade up")
    if skipping():
        raise RedisAway("Redis failed a moment ago; the database keeps the queue until it answers")
    key = (url, current_app.config.get("REDIS_TIMEOUT_S", 10))
    if key not in _connections:
        _connections[key] = redis.Redis.from_url(url, socket_timeout=key[1], socket_connect_timeout=min(3, key[1]))
    return _connections[key]


def queue_name(resource: str) -> str:
    """Queues by resource class: ``cpu``, ``gpu1``, ``gpu2`` ... so a host only takes jobs it can run."""
    return f"distgrade-{resource}"


def grading_mode(assignment_id: str) -> str:
    """The mode (cpu | gpu) an assignment is graded in on this deployment.

    ``GRADING_MODES="ddp_speedup=gpu,fsdp_fit=gpu"`` names assignments; the rest use
    ``GRADER_MODE``. Content files say what each mode needs, this setting picks the mode.
    """
    default = current_app.config.get("GRADER_MODE", "cpu")
    raw = current_app.config.get("GRADING_MODES") or os.environ.get("GRADING_MODES", "")
    for item in raw.split(","):
        name, _, mode = item.strip().partition("=")
        if name == assignment_id and mode in ("cpu", "gpu"):
            return mode
    return default


def queues_for_host(gpus: int) -> list[str]:
    """The queues a worker with ``gpus`` GPUs should listen on (it can run anything needing <= gpus)."""
    names = [queue_name(f"gpu{n}") for n in range(gpus, 0, -1)]
    return names + [queue_name("cpu")]


HANDOVER_S = 30  # how long one process may hold a submission's hand-over before another may repair it


def enqueue(sub: Submission) -> str | None:
    """Hand a stored submission to RQ. Returns the job id, or None if another process won the race.

    The next job id is committed first, then the job is handed to RQ. In between, a reconciler would
    find that id missing from RQ and take the next one: a second job and generation for one
    submission. So the hand-over is held in Redis (``SET NX``) from before the commit until RQ holds
    the job; another process that finds it held leaves the submission alone. A process that dies
    holding it leaves it for ``HANDOVER_S``, and the reconciler repairs the submission after that.
    """
    conn = redis_conn()
    handover = f"distgrade:handover:sub-{sub.id}"
    if not conn.set(handover, os.getpid(), nx=True, ex=HANDOVER_S):
        return None
    try:
        job_id = lifecycle.mark_enqueued(sub)
        if job_id is None:
            return None
        # our own limits fire first; a GPU job runs its CPU pre-flight and may wait for its GPUs first
        runs = 3 if sub.resource.startswith("gpu") else 1
        timeout = current_app.config["GRADE_TIMEOUT_S"] * runs + 300
        Queue(queue_name(sub.resource), connection=conn).enqueue(
            TASK, sub.id, job_id=job_id, job_timeout=timeout, result_ttl=3600, failure_ttl=86400)
    finally:
        conn.delete(handover)
    db.session.refresh(sub)
    return job_id


def try_enqueue(sub: Submission) -> str | None:
    """Put a stored, queued submission in line: it reaches RQ when its turn in the fair order comes.

    Returns its job id if it was handed to RQ now. With Redis unreachable it waits in the
    database for the reconciler.
    """
    if sub.queued_since is None:
        lifecycle.note_waiting(sub.id)
    try_dispatch(sub.resource)
    db.session.refresh(sub)
    try:
        return sub.job_id if in_rq(sub.job_id) else None
    except redis.exceptions.RedisError:
        redis_failed()
        return None


def job_state(job_id: str | None) -> str | None:
    """RQ's status of a job, or None if Redis no longer knows it."""
    if not job_id:
        return None
    try:
        return Job.fetch(job_id, connection=redis_conn()).get_status(refresh=True)
    except NoSuchJobError:
        return None


def in_rq(job_id: str | None) -> bool:
    """Does RQ still hold the job of a *queued* submission: waiting, or started by a worker that
    has not claimed the submission yet? A job started longer than ``CLAIM_GRACE_S`` ago whose
    submission is still queued belongs to a dead worker, so the submission is handed to RQ again
    (the claim's compare-and-set keeps a worker that was only slow from running it twice)."""
    if not job_id:
        return False
    try:
        job = Job.fetch(job_id, connection=redis_conn())
    except NoSuchJobError:
        return False
    status = job.get_status(refresh=False)
    if status in _WAITING:
        return True
    if status != JobStatus.STARTED:
        return False
    started = job.started_at
    if started is None:
        return True
    now = utcnow()
    if (started.tzinfo is None) != (now.tzinfo is None):
        started = started.replace(tzinfo=now.tzinfo)
    return (now - started).total_seconds() < CLAIM_GRACE_S


def queue_position(sub: Any) -> int | None:
    """1-based position of a queued submission in its queue's fair order (None if not waiting)."""
    return queue_place(sub)["queue_position"]


def queue_place(sub: Any) -> dict[str, Any]:
    """Where a queued submission stands: ``queue_position`` and ``eta_s`` (expected start in seconds).

    Jobs already handed to RQ come first (in RQ's order), then the fair order of the rest.
    The ETA uses the median grading time of the last hour and the free worker slots.
    """
    none = {"queue_position": None, "eta_s": None}
    if sub.status != SubmissionStatus.QUEUED.value:
        return none
    snap = _snapshot(sub.resource)
    try:
        pos = snap["order"].index(sub.id) + 1
    except ValueError:
        return none
    eta = fairness.eta_s(pos, snap["free"], snap["slots"], snap["durations"])
    return {"queue_position": pos, "eta_s": None if eta is None else round(eta)}


_SNAPSHOTS: dict[str, tuple[float, dict[str, Any]]] = {}
SNAPSHOT_TTL_S = 2.0  # every open status page polls once a second; the order is shared for 2 s


def _snapshot(resource: str) -> dict[str, Any]:
    cached = _SNAPSHOTS.get(resource)
    if cached and time.monotonic() - cached[0] < SNAPSHOT_TTL_S and not current_app.testing:
        return cached[1]
    in_rq: list[str] = []
    slots = busy = 0
    try:
        conn = redis_conn()
        in_rq = [j.decode() if isinstance(j, bytes) else j
                 for j in conn.lrange(Queue(queue_name(resource), connection=conn).key, 0, -1)]
        slots = sum(1 for w in live_workers(conn) if queue_name(resource) in w.queue_names())  # not the dead
    except redis.exceptions.RedisError:
        redis_failed()
    except RuntimeError:
        pass
    busy = db.session.scalar(db.select(func.count()).where(
        Submission.status == SubmissionStatus.RUNNING.value, Submission.resource == resource)) or 0
    waiting = ordered_waiting(resource)
    rank = {job: i for i, job in enumerate(in_rq)}
    order = sorted(waiting, key=lambda s: (0, rank[s.job_id]) if s.job_id in rank else (1, 0))
    snap = {"order": [s.id for s in order], "slots": slots, "free": max(0, slots - busy),
            "durations": recent_durations(resource)}
    _SNAPSHOTS[resource] = (time.monotonic(), snap)
    return snap


def recent_durations(resource: str, window_s: int = RECENT_S) -> list[float]:
    """Seconds each grading of this queue took, for those that finished in the last window."""
    since = utcnow() - timedelta(seconds=window_s)
    rows = db.session.execute(db.select(Submission.started_at, Submission.finished_at).where(
        Submission.resource == resource,
        Submission.finished_at >= since, Submission.started_at.is_not(None),
        Submission.status.in_(FINISHED_STATUSES))).all()
    return [(f - s).total_seconds() for s, f in rows]


def wait_stats(window_s: int = RECENT_S) -> list[tuple[str, int, float | None, float | None]]:
    """(queue class, gradings started, wait p50, wait p95) over the last window, in seconds.

    The wait runs from when the student started waiting (``queued_since``, else the upload)
    to when a worker took the job; a GPU job's pre-flight and GPU wait come after that.
    """
    since = utcnow() - timedelta(seconds=window_s)
    rows = db.session.execute(db.select(Submission.resource, Submission.started_at,
                                        func.coalesce(Submission.queued_since, Submission.created_at))
                              .where(Submission.started_at >= since)).all()
    by: dict[str, list[float]] = {}
    for resource, started, waited_from in rows:
        by.setdefault(resource, []).append(max(0.0, (started - waited_from).total_seconds()))
    return [(r, len(w), fairness.percentile(w, 50), fairness.percentile(w, 95)) for r, w in sorted(by.items())]


def recent_gradings(window_s: int = RECENT_S) -> dict[int, int]:
    """Gradings started per student in the last window (the fair queue's round-robin counter)."""
    since = utcnow() - timedelta(seconds=window_s)
    return dict(db.session.execute(db.select(Submission.user_id, func.count()).where(
        Submission.started_at >= since).group_by(Submission.user_id)).all())


def ordered_waiting(resource: str) -> list[Any]:
    """Queued submissions of one queue in fair order (rows with id, user_id, job_id, ...)."""
    regraded = db.select(Regrade.submission_id).where(Regrade.submission_id == Submission.id).exists()
    rows = db.session.execute(db.select(
        Submission.id, Submission.user_id, Submission.job_id, Submission.created_at, Submission.queued_since,
        regraded.label("regrade")).where(
        Submission.status == SubmissionStatus.QUEUED.value, Submission.resource == resource)).all()
    by_id = {r.id: r for r in rows}
    waiting = [fairness.Waiting(r.id, r.user_id, (r.queued_since or r.created_at).timestamp(), bool(r.regrade))
               for r in rows]
    return [by_id[w.id] for w in fairness.fair_order(waiting, recent_gradings())]


def dispatch(resource: str, depth: int | None = None) -> list[int]:
    """Hand RQ the next submissions of one queue in fair order until ``depth`` wait in RQ.

    Safe to run concurrently: two dispatchers may both enqueue one more job than needed,
    never the same submission twice (``enqueue`` is a compare-and-set).
    """
    depth = QUEUE_DEPTH if depth is None else depth
    q = Queue(queue_name(resource), connection=redis_conn())
    room = depth - q.count
    sent: list[int] = []
    if room <= 0:
        return sent
    for row in ordered_waiting(resource):
        if room <= 0:
            break
        if in_rq(row.job_id):
            continue  # already in RQ (or being started by a worker)
        sub = db.session.get(Submission, row.id)
        if sub is None or sub.status != SubmissionStatus.QUEUED.value:
            continue
        if enqueue(sub):
            sent.append(sub.id)
        room -= 1  # if another dispatcher won this one, it is in RQ all the same
    return sent


def try_dispatch(resource: str) -> list[int]:
    """``dispatch``, but with Redis down the submissions wait in the database for the reconciler."""
    try:
        return dispatch(resource)
    except redis.exceptions.RedisError:
        redis_failed()
        current_app.logger.warning("redis unreachable; queue %s waits for the reconciler", resource)
        db.session.rollback()
        return []


def submit(sub: Submission) -> list[int]:
    """Queue a new, not yet committed submission, replacing the student's pending one(s).

    Returns the ids it replaced. A replaced submission that was waiting never runs; one
    that was running loses its lease (its worker stops it at the next heartbeat and cannot
    store a result). The replacement keeps the replaced one's place in line.
    """
    pending = db.session.scalars(db.select(Submission).where(
        Submission.user_id == sub.user_id, Submission.course_id == sub.course_id,
        Submission.assignment_id == sub.assignment_id, Submission.status.in_(PENDING_STATUSES))).all()
    lifecycle.create_queued(sub, min([p.queued_since or p.created_at for p in pending] + [utcnow()]))
    replaced = lifecycle.replace([p.id for p in pending], sub.id)
    db.session.commit()
    _drop_jobs([p.job_id for p in pending if p.id in replaced])
    # Two uploads at once both replaced the old one: the newer of them replaces the other.
    others = db.session.scalars(db.select(Submission.id).where(
        Submission.user_id == sub.user_id, Submission.course_id == sub.course_id,
        Submission.assignment_id == sub.assignment_id, Submission.status.in_(PENDING_STATUSES))).all()
    if len(others) > 1:
        newest = max(others)
        replaced += lifecycle.replace([i for i in others if i != newest], newest)
        db.session.commit()
    try_dispatch(sub.resource)
    return replaced


def _drop_jobs(job_ids: list[str | None]) -> None:
    """Take replaced submissions' jobs out of RQ so they do not hold its few places (best effort:
    a worker that still gets one finds the submission replaced and skips it)."""
    try:
        conn = redis_conn()
        for job_id in filter(None, job_ids):
            for name in conn.smembers("rq:queues") or []:
                conn.lrem(name, 0, job_id)
    except redis.exceptions.RedisError:
        redis_failed()
