"""Grading queue health: what the database says (queued / running / failed submissions, oldest
wait) beside what Redis says (RQ queue lengths, failed registries, workers and their GPUs).

The database is the source of truth for submissions; RQ is asked only about its own state.
If Redis is unreachable the page still shows the database half and says so.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import redis
from flask import current_app
from rq import Queue, Worker
from sqlalchemy import func

from server.extensions import db
from server.models import Submission, SubmissionStatus, utcnow
from server import sandbox_layers
from server.grading.queue import redis_conn, wait_stats
from server.grading.workers import worker_lost

_GPU_QUEUE = re.compile(r"^distgrade-gpu(\d+)$")


@dataclass
class WorkerInfo:
    name: str
    state: str
    queues: list[str]
    gpus: int  # the largest gpuN queue it listens to (0: CPU only)
    current_job: str | None
    last_heartbeat: datetime | None
    sandbox: dict | None = None  # the worker's sandbox probe (server.sandbox_layers)
    host: str = ""
    pid: int | None = None

    @property
    def label(self) -> str:
        """"host, process 1234" rather than RQ's random worker name."""
        return f"{self.host} · {self.pid}" if self.host and self.pid else self.name[:12]


@dataclass
class Restart:
    """One child of ``./distgrade up`` that died and was started again (``var/supervisor.json``)."""

    name: str
    count: int
    last_exit: int | None
    last_at: datetime | None


def supervisor_restarts(var: Path) -> list[Restart]:
    """What the supervisor recorded; nothing when it never restarted anything (or runs elsewhere)."""
    try:
        raw = json.loads((var / "supervisor.json").read_text())
    except (OSError, ValueError):
        return []
    out = []
    for name, entry in sorted(raw.items()) if isinstance(raw, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("restarts"), int):
            at = entry.get("last_at")
            out.append(Restart(str(name)[:40], entry["restarts"], entry.get("last_exit") if isinstance(entry.get("last_exit"), int) else None,
                               datetime.fromtimestamp(at, timezone.utc).replace(tzinfo=None) if isinstance(at, (int, float)) else None))
    return out


@dataclass
class QueueHealth:
    by_status: dict[str, int]
    oldest_queued_s: float | None
    oldest_running_s: float | None
    queues: list[tuple[str, int, int, int]] = field(default_factory=list)  # name, waiting, started, failed
    workers: list[WorkerInfo] = field(default_factory=list)
    redis_error: str | None = None
    recent_errors: list[Submission] = field(default_factory=list)
    waits: list[tuple[str, int, float | None, float | None]] = field(default_factory=list)  # last hour, per queue
    restarts: list[Restart] = field(default_factory=list)  # processes ./distgrade up started again

    @property
    def gpus(self) -> int:
        return sum(w.gpus for w in self.workers if w.state != "lost")


def gpus_of(queue_names: list[str]) -> int:
    """A worker's GPU count, read from the queues it serves (``queues_for_host``)."""
    return max((int(m.group(1)) for q in queue_names if (m := _GPU_QUEUE.match(q))), default=0)


def queue_health(course_ids: list[int] | None = None) -> QueueHealth:
    """Counts per status (optionally for some courses), oldest waits, RQ queues and workers."""
    where = [Submission.course_id.in_(course_ids)] if course_ids is not None else []
    by_status = dict(db.session.execute(
        db.select(Submission.status, func.count()).where(*where).group_by(Submission.status)).all())
    now = utcnow()
    oldest_q = db.session.scalar(db.select(func.min(func.coalesce(Submission.enqueued_at, Submission.created_at)))
                                 .where(Submission.status == SubmissionStatus.QUEUED.value, *where))
    oldest_r = db.session.scalar(db.select(func.min(Submission.started_at))
                                 .where(Submission.status == SubmissionStatus.RUNNING.value, *where))
    errors = db.session.scalars(db.select(Submission).where(Submission.status == SubmissionStatus.ERROR.value, *where)
                                .order_by(Submission.id.desc()).limit(10)).all()
    health = QueueHealth({s.value: by_status.get(s.value, 0) for s in SubmissionStatus},
                         (now - oldest_q).total_seconds() if oldest_q else None,
                         (now - oldest_r).total_seconds() if oldest_r else None, recent_errors=list(errors),
                         waits=wait_stats(), restarts=supervisor_restarts(Path(current_app.config["VAR_DIR"])))
    try:
        conn = redis_conn()
        for q in sorted(Queue.all(connection=conn), key=lambda q: q.name):
            health.queues.append((q.name, q.count, q.started_job_registry.count, q.failed_job_registry.count))
        for w in Worker.all(connection=conn):
            names = w.queue_names()
            state = "lost" if worker_lost(w) else str(w.get_state())  # RQ lists a killed one for minutes
            health.workers.append(WorkerInfo(w.name, state, names, gpus_of(names),
                                             w.get_current_job_id(), w.last_heartbeat,
                                             host=str(w.hostname or "")[:60], pid=w.pid,
                                             sandbox=sandbox_layers.read(conn, w.name)))
    except (redis.exceptions.RedisError, RuntimeError) as exc:
        health.redis_error = str(exc)
    health.workers.sort(key=lambda w: w.name)
    return health
