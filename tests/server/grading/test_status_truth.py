"""The status page tells the truth after a crash, with real processes.

A real RQ worker is SIGKILLed mid-run: until the lease runs out and a reconciler takes the
submission back, the page used to say "running" with the dead run's phase; the recovered
submission then waited as ``queued`` still showing that phase, and the final ``error`` kept it
too. One service for the whole story (kill, recover, retry, final error), as it happens.
"""
from __future__ import annotations

import re
import signal
from datetime import timedelta

from tests.server.grading.test_worker import probe_service, rows, submit, wait_until

RUNNING_PHASES = {"starting", "running", "run.single", "run.distributed", "checks", "preflight", "waiting_gpu"}


def _api(client, sid):
    resp = client.get(f"/api/submissions/{sid}")
    assert resp.status_code == 200, resp.data
    return resp.get_json()


def _status_text(page):
    """The sentence the page opens with (the i18n table for status.js holds every other one)."""
    return re.search(r'id="status-text"[^>]*>(.*?)</p>', page, re.S).group(1).strip()


def _phase(progress):
    return (progress or {}).get("phase")


def test_crash_recovery_and_final_error_show_what_is_true(tmp_path, redis_server):
    from server.extensions import db
    from server.grading.reconcile import reconcile
    from server.models import utcnow

    # grading "sleep 30" always outlives GRADE_TIMEOUT_S=8: the retry ends as an infrastructure error
    svc = probe_service(tmp_path, redis_server, timeout_s=8, lease_s=6)
    try:
        svc.app.config.update(WTF_CSRF_ENABLED=False, TESTING=True)
        client = svc.app.test_client()
        assert client.post("/login", data={"username": "alice", "password": "alice-pass"}).status_code == 302
        sid = submit(svc.app, "sleep 30")
        svc.start_worker("w1")
        wait_until(lambda: _phase(rows(svc.app, [sid])[sid].progress_json) == "running", 60, "the run's phase")
        assert _api(client, sid).get("host_lost") is False  # a live host is not reported lost
        svc.kill("w1", signal.SIGKILL)  # worker, work horse and grader: nothing renews the lease now

        # Nothing runs any more: once the heartbeat is overdue the page says so, before the lease ends.
        lost = wait_until(lambda: (lambda d: d if d.get("host_lost") else None)(_api(client, sid)), 20,
                          "the page to notice the lost host")
        assert lost["status"] == "running" and isinstance(lost["retry_in_s"], int) and lost["retry_in_s"] >= 0
        page = client.get(f"/submissions/{sid}").get_data(as_text=True)  # zh-CN, the default
        assert "评分主机已失联" in _status_text(page)
        page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
        assert _status_text(page).startswith("The grading host was lost; nothing runs now. It will be retried in about")
        with svc.app.app_context():  # the lease is over: the page still says lost, retried soon
            lease_until = rows(svc.app, [sid])[sid].lease_until
        wait_until(lambda: utcnow() > lease_until + timedelta(seconds=0.5), 10, "the lease to run out")
        assert _api(client, sid)["host_lost"] is True

        # The reconciler takes it back: queued again, its phases start afresh.
        with svc.app.app_context():
            assert reconcile() == [sid]  # recovered and handed to RQ again (a new job id)
            db.session.remove()
        sub = rows(svc.app, [sid])[sid]
        assert sub.status == "queued" and _phase(sub.progress_json) is None, sub.progress_json
        data = _api(client, sid)
        assert data["status"] == "queued" and _phase(data["progress"]) is None and not data.get("host_lost")

        # The retry times out (an infrastructure error, no retries left): a final state, no running phase.
        svc.start_worker("w2")
        sub = wait_until(lambda: (lambda s: s if s.status == "error" else None)(rows(svc.app, [sid])[sid]), 90,
                         "the final error")
        assert _phase(sub.progress_json) not in RUNNING_PHASES, sub.progress_json
        data = _api(client, sid)
        assert _phase(data["progress"]) not in RUNNING_PHASES and not data.get("host_lost")
        page = client.get(f"/submissions/{sid}").get_data(as_text=True)
        assert 'id="phase">running<' not in page and _status_text(page) == ""
    finally:
        svc.stop()
