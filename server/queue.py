"""The grading queue: RQ on Redis, one queue per resource class, reconciled from the database.

The database is the source of truth. A submission is committed before it is
enqueued; the RQ job carries only its id. Job ids are ``sub-<id>-g<gen>`` and
``enqueue_gen`` is advanced with a compare-and-set, so two processes that try
to enqueue the same submission produce one job. ``reconcile`` repairs what Redis
or a worker lost (a Redis restart, a SIGKILLed worker) and is safe to run
concurrently from every worker.
"""
from __future__ import annotations

from datetime import datetime, timedelta

import redis
from flask import current_app
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from sqlalchemy import update

from server.extensions import db
from server.models import Submission, SubmissionStatus, utcnow

TASK = "server.tasks.grade_submission"
_connections: dict[str, redis.Redis] = {}


def redis_conn() -> redis.Redis:
    """A Redis connection for the configured ``REDIS_URL`` (one pool per URL)."""
    url = current_app.config["REDIS_URL"]
    if not url:
        raise RuntimeError("REDIS_URL is not set: start the service with ./distgrade up")
    if url not in _connections:
        _connections[url] = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=3)
    return _connections[url]


def queue_name(resource: str) -> str:
    """Queues by resource class: ``cpu``, ``gpu1``, ``gpu2`` ... so a host only takes jobs it can run."""
    return f"distgrade-{resource}"


def queues_for_host(gpus: int) -> list[str]:
    """The queues a worker with ``gpus`` GPUs should listen on (it can run anything needing <= gpus)."""
    names = [queue_name(f"gpu{n}") for n in range(gpus, 0, -1)]
    return names + [queue_name("cpu")]


def enqueue(sub: Submission) -> str | None:
    """Hand a stored submission to RQ. Returns the job id, or None if another process won the race."""
    gen = sub.enqueue_gen
    job_id = f"sub-{sub.id}-g{gen + 1}"
    won = db.session.execute(
        update(Submission)
        .where(Submission.id == sub.id, Submission.enqueue_gen == gen,
               Submission.status == SubmissionStatus.QUEUED.value)
        .values(enqueue_gen=gen + 1, job_id=job_id, enqueued_at=utcnow())
    ).rowcount
    db.session.commit()
    if not won:
        return None
    timeout = current_app.config["GRADE_TIMEOUT_S"] + 300  # our own limit fires first
    Queue(queue_name(sub.resource), connection=redis_conn()).enqueue(
        TASK, sub.id, job_id=job_id, job_timeout=timeout, result_ttl=3600, failure_ttl=86400)
    db.session.refresh(sub)
    return job_id


def try_enqueue(sub: Submission) -> str | None:
    """Enqueue, but leave the submission queued for the reconciler if Redis is unreachable."""
    try:
        return enqueue(sub)
    except redis.exceptions.RedisError:
        current_app.logger.warning("redis unreachable; submission %s waits for the reconciler", sub.id)
        db.session.rollback()
        return None


def job_state(job_id: str | None) -> str | None:
    """RQ's status of a job, or None if Redis no longer knows it."""
    if not job_id:
        return None
    try:
        return Job.fetch(job_id, connection=redis_conn()).get_status(refresh=True)
    except NoSuchJobError:
        return None


def queue_position(sub: Submission) -> int | None:
    """1-based position of a queued submission in its queue (None if not waiting)."""
    if sub.status != SubmissionStatus.QUEUED.value or not sub.job_id:
        return None
    try:
        q = Queue(queue_name(sub.resource), connection=redis_conn())
        pos = q.get_job_position(sub.job_id)
    except redis.exceptions.RedisError:
        return None
    return None if pos is None else pos + 1


_DEAD = {JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED, JobStatus.FINISHED, None}


def reconcile() -> list[int]:
    """Re-enqueue submissions whose job is gone; recover those whose worker died.

    Returns the ids it re-enqueued. A running submission whose lease expired lost
    its worker: that is an infrastructure failure, retried ``MAX_INFRA_RETRIES``
    times and then ended as ``error`` (never counted as an attempt).
    """
    now = utcnow()
    requeued: list[int] = []
    max_retries = current_app.config["MAX_INFRA_RETRIES"]
    expired = db.session.scalars(
        db.select(Submission).where(Submission.status == SubmissionStatus.RUNNING.value,
                                    Submission.lease_until < now)).all()
    for sub in expired:
        retry = sub.infra_retries < max_retries
        if retry:
            values = dict(status=SubmissionStatus.QUEUED.value, infra_retries=sub.infra_retries + 1,
                          run_token=None, lease_until=None)
        else:
            values = dict(status=SubmissionStatus.ERROR.value, finished_at=now, run_token=None,
                          error_detail="worker lost twice (lease expired); not counted")
        won = db.session.execute(update(Submission).where(
            Submission.id == sub.id, Submission.status == SubmissionStatus.RUNNING.value,
            Submission.run_token == sub.run_token).values(**values)).rowcount
        db.session.commit()
        # The old job may still sit in RQ's started registry: it is dead by its lease, so enqueue anew.
        if won and retry:
            db.session.refresh(sub)
            if enqueue(sub):
                requeued.append(sub.id)

    waiting = db.session.scalars(
        db.select(Submission).where(Submission.status == SubmissionStatus.QUEUED.value)).all()
    for sub in waiting:
        if job_state(sub.job_id) in _DEAD and enqueue(sub):
            requeued.append(sub.id)
    return requeued


def lease_deadline() -> datetime:
    """When a lease taken now expires."""
    return utcnow() + timedelta(seconds=current_app.config["LEASE_S"])
