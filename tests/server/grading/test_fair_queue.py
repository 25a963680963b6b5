"""The fair queue: ordering and ETA as pure functions, replacement and order with real Redis and workers."""
from __future__ import annotations

import signal  # noqa: F401
from datetime import timedelta

import pytest

from server.grading import fairness
from server.grading.fairness import Waiting
from tests.server.grading.test_worker import FIXTURES, all_final, probe_service, probe_upload, rows, wait_until


# --- pure functions -------------------------------------------------------------------------------

def test_fewest_recent_gradings_first_then_regrades_last():
    w = [Waiting(1, student=10, since=0.0), Waiting(2, student=10, since=1.0), Waiting(3, student=20, since=2.0),
         Waiting(4, student=30, since=-5.0, regrade=True), Waiting(5, student=40, since=3.0)]
    recent = {10: 3, 20: 0, 40: 1}
    assert [x.id for x in fairness.fair_order(w, recent)] == [3, 5, 1, 2, 4]
    assert [x.id for x in fairness.fifo_order(w)] == [4, 1, 2, 3, 5]


def test_a_student_with_twenty_uploads_does_not_go_first():
    """Round-robin in effect: each grading started raises that student's count."""
    waiting = [Waiting(i, student=1, since=float(i)) for i in range(20)] + [Waiting(100 + s, s, 50.0) for s in (2, 3)]
    recent: dict[int, int] = {}
    started = []
    while waiting:
        nxt = fairness.fair_order(waiting, recent)[0]
        waiting.remove(nxt)
        recent[nxt.student] = recent.get(nxt.student, 0) + 1
        started.append(nxt.student)
    assert started.index(2) <= 2 and started.index(3) <= 3  # FIFO would have put them 21st and 22nd


@pytest.mark.parametrize("position, free, slots, durations, want", [
    (1, 1, 2, [60.0], 0.0),
    (2, 2, 2, [60.0], 0.0),
    (2, 1, 2, [60.0], 30.0),  # one ahead takes the free slot; then a slot frees every 60/2 s
    (3, 1, 2, [60.0], 60.0),
    (5, 0, 2, [30.0, 60.0, 90.0], 150.0),
    (1, 0, 1, [], fairness.DEFAULT_GRADING_S),
    (1, 0, 0, [60.0], None),  # no worker serves this queue
])
def test_eta(position, free, slots, durations, want):
    assert fairness.eta_s(position, free, slots, durations) == want


def test_percentile_nearest_rank():
    assert fairness.percentile([], 50) is None
    assert fairness.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert fairness.percentile(list(map(float, range(1, 101))), 95) == 95.0


# --- with the database and Redis ------------------------------------------------------------------

@pytest.fixture
def queue_app(app, monkeypatch):
    """The app with the probe assignment; nothing reaches RQ unless a test asks (QUEUE_DEPTH 0)."""
    import server.grading.queue

    monkeypatch.setenv("DISTGRADE_ASSIGNMENTS_DIR", str(FIXTURES / "assignments"))
    monkeypatch.setattr(server.grading.queue, "QUEUE_DEPTH", 0)
    return app


def upload(app, username: str, body: str = "score 1", resource: str = "cpu") -> tuple[int, list[int]]:
    """Store a probe upload through ``server.grading.queue.submit`` as the upload page does."""
    from server.grading.queue import submit

    with app.app_context():
        sub = probe_upload(body, username, resource)
        replaced = submit(sub)
        return sub.id, replaced


def test_new_upload_replaces_the_waiting_one_and_keeps_its_place(queue_app):
    first, replaced = upload(queue_app, "alice")
    assert replaced == []
    bob, _ = upload(queue_app, "bob")
    second, replaced = upload(queue_app, "alice", "score 0.5")
    assert replaced == [first]
    subs = rows(queue_app, [first, second, bob])
    assert subs[first].status == "replaced" and subs[first].replaced_by == second
    assert subs[second].status == "queued" and subs[second].queued_since == subs[first].queued_since
    from server.grading.queue import ordered_waiting, queue_place
    with queue_app.app_context():
        assert [r.id for r in ordered_waiting("cpu")] == [second, bob]  # alice kept her place
        place = queue_place(subs[bob])
        assert place["queue_position"] == 2 and place["eta_s"] is None  # no worker serves the queue
        assert queue_place(subs[first]) == {"queue_position": None, "eta_s": None}


def test_replaced_submission_costs_no_attempt_and_upload_is_not_refused(queue_app, client, auth):
    from server.extensions import db
    from server.homework.rules import homework_for
    from server.models import CourseAssignment, User

    with queue_app.app_context():
        db.session.add(CourseAssignment(course_id=1, assignment_id="probe", attempt_limit=1))
        db.session.commit()
    auth.login("alice", "alice-pass")
    for body in (b"score 1", b"score 0.5"):
        import io
        resp = client.post("/homework/DIST101/probe", data={"file": (io.BytesIO(body), "s.txt")},
                           content_type="multipart/form-data")
        assert resp.status_code == 302, resp.get_data(as_text=True)[:500]
    page = client.get(resp.headers["Location"]).get_data(as_text=True)
    assert "replaced it" in page or "替换" in page
    with queue_app.app_context():
        alice = db.session.scalar(db.select(User).where(User.username == "alice"))
        hw = next(h for h in homework_for(alice) if h.assignment.id == "probe")
        assert (hw.used, hw.pending) == (0, 1)


def test_regrade_waits_behind_first_gradings_and_busy_students_behind_others(queue_app):
    from server.scores.actions import regrade
    from server.extensions import db
    from server.models import Submission, User, utcnow
    from server.grading.queue import ordered_waiting

    old, _ = upload(queue_app, "bob")
    with queue_app.app_context():
        teacher = db.session.scalar(db.select(User).where(User.username == "teacher"))
        sub = db.session.get(Submission, old)
        sub.status, sub.score, sub.started_at, sub.finished_at = "graded", 1.0, utcnow() - timedelta(hours=2), utcnow()
        db.session.commit()
        regrade([sub], teacher.id)
    # alice was graded twice in the last hour; teacher (a student here for the test) never
    for _ in range(2):
        done, _ = upload(queue_app, "alice")
        with queue_app.app_context():
            s = db.session.get(Submission, done)
            s.status, s.started_at, s.finished_at = "graded", utcnow(), utcnow()
            db.session.commit()
    a, _ = upload(queue_app, "alice")
    t, _ = upload(queue_app, "teacher")
    with queue_app.app_context():
        assert [r.id for r in ordered_waiting("cpu")] == [t, a, old]


@pytest.fixture
def probe(tmp_path, redis_server):
    svc = probe_service(tmp_path, redis_server, timeout_s=30, lease_s=3, QUEUE_DEPTH="1")
    yield svc
    svc.stop()


def test_real_worker_starts_jobs_in_fair_order_and_stops_a_replaced_run(probe, monkeypatch):
    import server.grading.queue

    monkeypatch.setenv("DISTGRADE_ASSIGNMENTS_DIR", str(FIXTURES / "assignments"))
    monkeypatch.setattr(server.grading.queue, "QUEUE_DEPTH", 0)  # this process only stores; the worker dispatches
    # alice was just graded twice (direct rows), so bob and teacher go before her next upload
    from server.extensions import db
    from server.models import Submission, utcnow
    for _ in range(2):
        done, _ = upload(probe.app, "alice")
        with probe.app.app_context():
            s = db.session.get(Submission, done)
            s.status, s.started_at, s.finished_at, s.results_stored = "graded", utcnow(), utcnow(), 1
            db.session.commit()
    a, _ = upload(probe.app, "alice", "sleep 0.5")
    b, _ = upload(probe.app, "bob", "sleep 0.5")
    t, _ = upload(probe.app, "teacher", "sleep 20")
    probe.start_worker("w1")
    wait_until(lambda: rows(probe.app, [t])[t].status == "running", 60, "teacher's long job")
    t2, replaced = upload(probe.app, "teacher", "score 1")  # replaces the running one
    assert replaced == [t]
    subs = wait_until(lambda: all_final(probe.app, [a, b, t2]), 90, "the rest")
    started = sorted([a, b, t2], key=lambda i: subs[i].started_at)
    assert started.index(b) < started.index(a)  # bob (no recent gradings) before alice
    stopped = rows(probe.app, [t])[t]
    assert stopped.status == "replaced" and stopped.results_stored == 0 and stopped.score is None
    assert subs[t2].status == "graded" and subs[t2].results_stored == 1
    # the long job was stopped early, not run to its end
    assert (subs[t2].finished_at - stopped.started_at).total_seconds() < 20


def test_queue_health_shows_wait_percentiles_per_queue(queue_app, client, auth):
    from server.extensions import db
    from server.models import Submission, utcnow
    from server.grading.queue import wait_stats

    now = utcnow()
    waits = {"cpu": [10, 20, 30, 40, 200], "gpu2": [60]}
    for resource, secs in waits.items():
        for s in secs:
            sid, _ = upload(queue_app, "alice", resource=resource)
            with queue_app.app_context():
                sub = db.session.get(Submission, sid)
                sub.status, sub.queued_since, sub.started_at = "graded", now - timedelta(seconds=s), now
                sub.finished_at = now
                db.session.commit()
    with queue_app.app_context():
        old = db.session.get(Submission, upload(queue_app, "bob")[0])  # started two hours ago: outside the window
        old.status, old.queued_since, old.started_at = "graded", now - timedelta(hours=3), now - timedelta(hours=2)
        db.session.commit()
        assert wait_stats() == [("cpu", 5, 30.0, 200.0), ("gpu2", 1, 60.0, 60.0)]
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/queue?lang=en").get_data(as_text=True)
    assert "Wait in the queue over the last hour" in page and "3:20" in page  # p95 of cpu: 200 s


def test_deadline_rush_bench_prints_its_table_and_the_fair_queue_helps_under_load():
    from bench import deadline_rush

    out = deadline_rush.main(["--students", "200", "--slots", "8", "--scale", "5"])
    fifo, fair = (line.split() for line in out.splitlines()[3:5])
    assert fifo[0] == "FIFO" and fair[:2] == ["fair", "queue"]
    p95 = lambda row: float(row[-3].rstrip("m"))  # noqa: E731
    assert p95(fair) < p95(fifo)
    uploads = deadline_rush.make_uploads(200, 1, [10.0])
    assert len({u.student for u in uploads}) == 200 and all(0 <= u.arrival <= 3600 for u in uploads)


def test_mode_per_deployment_picks_the_resources_from_the_content(queue_app, client, auth):
    """assignment.json says what each mode needs; one setting says which mode this deployment grades in."""
    import io

    from server.extensions import db
    from server.models import CourseAssignment, Submission

    with queue_app.app_context():
        db.session.add(CourseAssignment(course_id=1, assignment_id="probe"))
        db.session.commit()
    auth.login("alice", "alice-pass")
    for setting, want in (("", ("cpu", "cpu")), ("other=gpu, probe=gpu", ("gpu", "gpu2"))):
        queue_app.config["GRADING_MODES"] = setting
        client.post("/homework/DIST101/probe", data={"file": (io.BytesIO(b"score 1"), "s.txt")},
                    content_type="multipart/form-data")
        with queue_app.app_context():
            sub = db.session.scalars(db.select(Submission).order_by(Submission.id.desc())).first()
            assert (sub.mode, sub.resource) == want


def test_homework_content_declares_its_gpu_resources():
    from coursework.assignments import load

    for name in ("ddp_speedup", "fsdp_fit"):
        assert (load(name).resource_for("cpu"), load(name).resource_for("gpu")) == ("cpu", "gpu2")
    assert load("config_annotation").resource_for("gpu") == "cpu"  # no GPU needed in any mode


def test_status_page_says_checked_on_cpu_waiting_for_a_gpu(client, auth, make_sub):
    sid = make_sub(status="running", progress_json={"phase": "waiting_gpu", "logs": {}})
    auth.login()
    assert "Checked on CPU, waiting for a GPU" in client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "CPU 预检已通过，正在等待 GPU" in client.get(f"/submissions/{sid}?lang=zh_CN").get_data(as_text=True)
    queued = make_sub("bob", status="queued")
    auth.logout()
    auth.login("bob", "bob-pass")
    page = client.get(f"/submissions/{queued}?lang=en").get_data(as_text=True)
    assert "Expected start" in page and 'id="eta"' in page
