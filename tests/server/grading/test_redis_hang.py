"""A Redis that hangs (accepts, never answers) must cost an upload a short, bounded wait.

Each upload used to wait out the 10 s socket timeout once per Redis call it made; now the
web's calls time out quickly and, after one failure, skip Redis for a few seconds: the
submission is stored as ``queued`` and the reconciler hands it to RQ when Redis is back.
"""
from __future__ import annotations

import socket
import time

from tests.server.grading.test_worker import probe_service, rows, submit


def test_a_hung_redis_costs_an_upload_a_bounded_wait(tmp_path, redis_server):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections complete in the kernel's backlog; nothing ever replies
    svc = probe_service(tmp_path, redis_server, timeout_s=8, lease_s=6)
    from server import create_app
    from server.grading import queue

    app = create_app({"SQLALCHEMY_DATABASE_URI": svc.env["DATABASE_URL"], "VAR_DIR": str(tmp_path / "var"),
                      "REDIS_URL": f"redis://127.0.0.1:{silent.getsockname()[1]}/0", "REDIS_TIMEOUT_S": 1.0})
    try:
        started = time.monotonic()
        first = submit(app, "score 1")
        first_s = time.monotonic() - started
        started = time.monotonic()
        second = submit(app, "score 1", username="bob")
        second_s = time.monotonic() - started
        assert first_s < 4, first_s  # one timed-out call, not one per call
        assert second_s < 1, second_s  # Redis is skipped for a few seconds after it failed
        assert {s.status for s in rows(app, [first, second]).values()} == {"queued"}
    finally:
        silent.close()
        queue.redis_recovered()
