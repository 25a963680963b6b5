"""Which RQ workers are alive: RQ lists a worker until its key expires, minutes after a SIGKILL.

A worker killed by SIGKILL (the OOM killer, an operator) never unregisters: RQ kept listing it as
idle until its key expired (``worker_ttl`` + 60 s, eight minutes by default), the queue page showed
it "waiting for work" and the ETA counted it as a free slot. A worker here is lost when

* it runs on this host and its process is gone (known at once), or
* its last heartbeat is older than ``STALE_S`` (any host): an idle worker beats every
  ``WORKER_TTL_S - 15`` s while it waits for a job, a busy one every 30 s (RQ's job monitoring).
"""
from __future__ import annotations

import os
import socket
from datetime import datetime, timezone

from rq import Worker

WORKER_TTL_S = 30  # what our workers tell RQ: an idle one beats every 15 s
STALE_S = 75.0  # two missed beats of a busy worker, and some slack


def worker_lost(worker: Worker, now: datetime | None = None) -> bool:
    """True if ``worker`` is registered in RQ but no longer runs (see the module docstring)."""
    if worker.hostname == socket.gethostname() and worker.pid:
        try:
            os.kill(int(worker.pid), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, ValueError, OverflowError):
            pass  # someone else's process: alive
    beat = worker.last_heartbeat
    if beat is None:
        return False  # registering right now
    now = now or datetime.now(timezone.utc)
    if beat.tzinfo is None:
        beat = beat.replace(tzinfo=timezone.utc)
    return (now - beat).total_seconds() > STALE_S


def live_workers(connection) -> list[Worker]:
    """RQ's workers less the lost ones."""
    return [w for w in Worker.all(connection=connection) if not worker_lost(w)]
