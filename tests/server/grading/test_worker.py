"""The queue and worker against real processes: redis-server, RQ workers, SIGKILL, Redis restarts.

Grading uses the ``probe`` assignment (tests/fixtures), a real grader plugin whose
submissions say how long to take or how to fail, so these tests exercise the real
worker, subprocess, lease and reconciler code paths in seconds.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import Service, redis_server_flush

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def probe_service(tmp_path, redis_server, timeout_s: int, lease_s: int, **env: str) -> Service:
    """A migrated, seeded service grading the ``probe`` assignment; ``svc.app`` is its app in this process."""
    redis_server_flush(redis_server)
    svc = Service(tmp_path, redis_server.url, extra_env={
        "DISTGRADE_ASSIGNMENTS_DIR": str(FIXTURES / "assignments"),
        "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]),
        "GRADE_TIMEOUT_S": str(timeout_s), **env})
    svc.seed()  # a copy of the session's migrated, seeded database for this assignments folder
    from server import create_app

    svc.app = create_app({"SQLALCHEMY_DATABASE_URI": svc.env["DATABASE_URL"], "REDIS_URL": redis_server.url,
                          "VAR_DIR": str(tmp_path / "var"), "GRADE_TIMEOUT_S": timeout_s, "LEASE_S": lease_s})
    return svc


@pytest.fixture
def probe(tmp_path, redis_server):
    svc = probe_service(tmp_path, redis_server, timeout_s=8, lease_s=6)
    yield svc
    svc.stop()


def probe_upload(body: str, username: str = "alice", resource: str = "cpu"):
    """A new, unsaved ``Submission`` of the probe assignment (inside an app context)."""
    from server.extensions import db
    from server.models import Course, Submission, User

    user = db.session.scalar(db.select(User).where(User.username == username))
    course = db.session.scalar(db.select(Course))
    data = body.encode()
    return Submission(user_id=user.id, course_id=course.id, assignment_id="probe", filename="s.txt",
                      content=data, sha256=Submission.digest(data), size=len(data), resource=resource)


def submit(app, body: str, username: str = "alice", resource: str = "cpu") -> int:
    """Store a probe submission and enqueue it, as the upload page does."""
    from server.extensions import db
    from server.grading.queue import try_enqueue

    with app.app_context():
        sub = probe_upload(body, username, resource)
        db.session.add(sub)
        db.session.commit()
        try_enqueue(sub)
        return sub.id


def rows(app, ids):
    from server.extensions import db
    from server.models import Submission

    from sqlalchemy.orm import undefer

    with app.app_context():
        db.session.expire_all()
        return {i: db.session.get(Submission, i, options=[undefer("*")]) for i in ids}


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def all_final(app, ids):
    subs = rows(app, ids)
    return subs if all(s.status in ("graded", "error") for s in subs.values()) else None


def test_submissions_are_graded_once_each(probe):
    ids = [submit(probe.app, "sleep 0.2"), submit(probe.app, "score 0.5"), submit(probe.app, "score 1")]
    probe.start_worker()
    subs = wait_until(lambda: all_final(probe.app, ids), 90, "grading")
    assert [s.status for s in subs.values()] == ["graded"] * 3
    assert [s.score for s in subs.values()] == [1.0, 0.5, 1.0]
    assert all(s.results_stored == 1 and s.grading_runs == 1 for s in subs.values())
    assert all(s.report_json["checks"][0]["id"] == "probe.ran" for s in subs.values())


def test_grader_crash_is_error_with_traceback_and_costs_no_attempt(probe):
    sid = submit(probe.app, "crash")
    probe.start_worker()
    sub = wait_until(lambda: all_final(probe.app, [sid]), 60, "crash report")[sid]
    assert sub.status == "error" and not sub.counts_as_attempt
    assert "probe grader crashed on purpose" in sub.error_detail
    assert "staff notified" in sub.report_json["summary"]["en"]
    assert sub.infra_retries == 0  # a deterministic grader bug is not retried


def test_grader_timeout_is_retried_once_then_error(probe):
    sid = submit(probe.app, "hang")
    first_enqueued = rows(probe.app, [sid])[sid].enqueued_at
    probe.start_worker()
    sub = wait_until(lambda: all_final(probe.app, [sid]), 90, "timeout handling")[sid]
    assert sub.status == "error" and not sub.counts_as_attempt
    assert sub.infra_retries == 1 and sub.grading_runs == 2
    # the student's clock runs from the first hand-over: a retry does not start it again at 0:00
    assert first_enqueued is not None and sub.enqueued_at == first_enqueued
    assert "GRADE_TIMEOUT_S" in sub.error_detail


def test_sigkilled_worker_loses_nothing(probe):
    ids = [submit(probe.app, "sleep 3") for _ in range(3)]
    probe.start_worker("w1")
    wait_until(lambda: any(s.status == "running" for s in rows(probe.app, ids).values()), 60, "a running job")
    probe.kill("w1", signal.SIGKILL)  # the whole worker: main process, work horse, grader
    probe.start_worker("w2")
    subs = wait_until(lambda: all_final(probe.app, ids), 120, "recovery after SIGKILL")
    assert [s.status for s in subs.values()] == ["graded"] * 3
    assert all(s.results_stored == 1 for s in subs.values())
    assert max(s.grading_runs for s in subs.values()) == 2  # the killed one ran again
    assert sum(s.infra_retries for s in subs.values()) == 1


def test_redis_restart_mid_flight_loses_nothing(probe, redis_server):
    ids = [submit(probe.app, "sleep 1.5") for _ in range(4)]
    probe.start_worker("w1")
    probe.start_worker("w2")
    wait_until(lambda: any(s.status == "running" for s in rows(probe.app, ids).values()), 60, "a running job")
    redis_server.restart()  # every queued job and registry is gone
    subs = wait_until(lambda: all_final(probe.app, ids), 120, "recovery after Redis restart")
    assert [s.status for s in subs.values()] == ["graded"] * 4
    assert all(s.results_stored == 1 for s in subs.values())


def test_submit_while_redis_is_down_is_stored_and_graded_later(probe, redis_server):
    redis_server.stop()
    try:
        sid = submit(probe.app, "score 1")
        assert rows(probe.app, [sid])[sid].status == "queued"  # stored, nothing lost
    finally:
        redis_server.start()
    probe.start_worker()
    sub = wait_until(lambda: all_final(probe.app, [sid]), 60, "late grading")[sid]
    assert sub.status == "graded" and sub.results_stored == 1


def test_queues_by_resource_class(probe):
    """A CPU host never takes a 2-GPU job; a host with WORKER_GPUS=2 takes gpu2, gpu1 and cpu jobs."""
    ids = {r: submit(probe.app, "score 1", resource=r) for r in ("cpu", "gpu1", "gpu2")}
    probe.start_worker("cpu-host")
    wait_until(lambda: rows(probe.app, [ids["cpu"]])[ids["cpu"]].status == "graded", 60, "the cpu job")
    time.sleep(3)  # the reconciler runs every second: it must not hand GPU jobs to this host either
    subs = rows(probe.app, list(ids.values()))
    assert subs[ids["gpu1"]].status == subs[ids["gpu2"]].status == "queued"
    probe.env["WORKER_GPUS"] = "2"
    probe.start_worker("gpu-host")
    subs = wait_until(lambda: all_final(probe.app, list(ids.values())), 60, "the GPU jobs")
    assert all(s.status == "graded" and s.results_stored == 1 for s in subs.values())


def test_a_worker_killed_mid_job_takes_its_work_horse_and_grader_with_it(tmp_path, redis_server):
    """The supervisor stops a worker by signalling its process group, and SIGKILLs it after a grace
    period; RQ's work horse runs in a process group of its own, so it used to outlive the worker
    (seen with ``./distgrade up``: Ctrl-C during a grading left the horse, the grader and its
    torchrun ranks running, orphaned). Only the worker's main process is killed here."""
    from tests.conftest import descendants
    from tests.ops.test_supervisor import wait_gone

    probe = probe_service(tmp_path, redis_server, timeout_s=120, lease_s=6)  # no timeout ends the job for it
    try:
        sid = submit(probe.app, "sleep 60")
        worker = probe.start_worker("w1")
        wait_until(lambda: rows(probe.app, [sid])[sid].status == "running", 60, "a running job")
        below = wait_until(lambda: descendants(worker.pid) if len(descendants(worker.pid)) >= 2 else None,
                           30, "the work horse and its grader")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        assert wait_gone(below, timeout=10) == [], below
    finally:
        probe.stop()


def test_a_worker_whose_pubsub_lost_its_subscription_still_stops_at_once(redis_server):
    """Seen in CI: the supervisor SIGKILLed, Redis and the worker both got SIGTERM, the worker's
    pub/sub connection dropped first, and the worker outlived everything. RQ's teardown stops the
    pub/sub thread with redis-py's unbounded join while that thread waits up to 60 s for a
    subscription that will never come back. The same state here, reached with a live Redis."""
    import redis
    from rq import Queue

    from server.grading.worker import GradingWorker

    redis_server_flush(redis_server)
    conn = redis.Redis.from_url(redis_server.url)
    worker = GradingWorker([Queue("teardown-probe", connection=conn)], connection=conn)
    worker.subscribe()
    worker.pubsub.unsubscribe()  # what a dropped connection leaves: the thread waits for a subscription
    wait_until(lambda: not worker.pubsub.subscribed or None, 10, "the subscription gone")
    time.sleep(0.5)  # the thread is back in get_message, waiting on the subscription
    started = time.monotonic()
    worker.unsubscribe()
    assert time.monotonic() - started < 5
