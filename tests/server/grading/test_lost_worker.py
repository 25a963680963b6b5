"""A SIGKILLed worker is not shown as waiting for work, nor counted as a free slot.

RQ lists a worker until its key expires, minutes after a SIGKILL: the queue page showed it
"waiting for work" and the queue's ETA counted it as a free slot. Real worker processes, a real kill.
"""
from __future__ import annotations

import time

from tests.server.grading.test_worker import probe_service, submit, wait_until


def _workers(app):
    from server.dashboard.queue_health import queue_health

    with app.app_context():
        return queue_health().workers


def _place(app, sid):
    from server.extensions import db
    from server.grading.queue import queue_place
    from server.models import Submission

    with app.app_context():
        return queue_place(db.session.get(Submission, sid))


def test_a_killed_worker_is_lost_and_no_free_slot(tmp_path, redis_server):
    svc = probe_service(tmp_path, redis_server, timeout_s=30, lease_s=6)
    try:
        svc.start_worker("w1")
        wait_until(lambda: [w.state for w in _workers(svc.app)] == ["idle"], 60, "the worker registered")
        svc.kill("w1")  # SIGKILL: it never unregisters
        time.sleep(0.5)
        assert [w.state for w in _workers(svc.app)] == ["lost"]
        sid = submit(svc.app, "score 1")
        place = _place(svc.app, sid)
        assert place["queue_position"] == 1 and place["eta_s"] is None  # no slot serves it: no "starts now"
        svc.start_worker("w2")
        wait_until(lambda: sorted(w.state for w in _workers(svc.app)) in (["idle", "lost"], ["busy", "lost"]),
                   60, "the new worker beside the lost one")
    finally:
        svc.stop()
