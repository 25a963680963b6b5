"""The moves of a submission's status (``server.grading.lifecycle``) on a real SQLite database.

Each move is a compare-and-set: from the state it expects it changes the row; from any other
it changes nothing and says so. The column lists behind a regrade are held to what claim,
store and an infrastructure failure really write.
"""
from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from tests.server.conftest import PLACEHOLDER, SAMPLE_REPORT

ALL = ("queued", "running", "graded", "error", "replaced")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One migrated SQLite database for the module: each test works on submissions of its own.

    (The shared ``app`` fixture migrates a database per test, a second each; these are many
    small tests and need neither Redis nor an assignment folder.)
    """
    from flask_migrate import upgrade

    from server import create_app

    var = tmp_path_factory.mktemp("lifecycle") / "var"
    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{var / 'test.db'}",
                      "VAR_DIR": str(var), "SECRET_KEY": "test", "REDIS_URL": None})
    with app.app_context():
        upgrade()
        app.test_cli_runner().invoke(args=["seed-demo"])
    return app


@pytest.fixture
def make_sub(app):
    """Store a submission in any state directly (no queue)."""
    from server.extensions import db
    from server.models import Submission, User, utcnow

    def make(status: str = "queued", **fields) -> int:
        with app.app_context():
            user = db.session.scalar(db.select(User).where(User.username == "alice"))
            data = b"print('hi')\n"
            now = utcnow()
            sub = Submission(user_id=user.id, course_id=1, assignment_id=PLACEHOLDER, status=status,
                             filename="train.py", content=data, sha256=Submission.digest(data), size=len(data),
                             started_at=now if status != "queued" else None,
                             finished_at=now if status in ("graded", "error") else None, **fields)
            if status == "graded":
                sub.score, sub.max_score, sub.report_json = 5.0, 10.0, SAMPLE_REPORT
            db.session.add(sub)
            db.session.commit()
            return sub.id
    return make


def row(sid: int) -> dict:
    """Every column of the submission as the database has it now (no ORM cache)."""
    from server.extensions import db
    from server.models import Submission

    db.session.expire_all()
    table = Submission.__table__
    return dict(db.session.execute(db.select(table).where(table.c.id == sid)).one()._mapping)


def changed(before: dict, after: dict) -> set[str]:
    return {k for k in before if before[k] != after[k]}


def running(make_sub, app, **fields) -> tuple[int, str]:
    """A submission a worker has claimed: (id, run token)."""
    from server.grading import lifecycle

    sid = make_sub(status="queued", **fields)
    with app.app_context():
        token = lifecycle.claim(sid)
    assert token
    return sid, token


def in_state(make_sub, app, status: str) -> int:
    """A submission in ``status``; a running one holds a live lease under the token "held"."""
    from server.models import utcnow

    if status == "running":
        return make_sub(status="running", run_token="held", lease_until=utcnow() + timedelta(minutes=5))
    return make_sub(status=status)


# (move, the states it must refuse): a refused move returns its "no" and leaves the row as it was.
REFUSALS = [
    ("mark_enqueued", ("running", "graded", "error", "replaced")),
    ("claim", ("running", "graded", "error", "replaced")),
    ("renew", ALL),  # with a token the row does not carry
    ("store_report", ALL),  # likewise; "running" here is another run's lease
    ("fail_infra", ALL),
    ("report_progress", ALL),  # with a token the row does not carry
    ("replace", ("graded", "error", "replaced")),
    ("reset_for_regrade", ("queued", "running", "replaced")),
]
CASES = [(move, state) for move, states in REFUSALS for state in states]


def attempt(move: str, sid: int):
    from server.extensions import db
    from server.grading import lifecycle
    from server.models import Submission

    if move == "mark_enqueued":
        return lifecycle.mark_enqueued(db.session.get(Submission, sid))
    if move == "claim":
        return lifecycle.claim(sid)
    if move == "renew":
        return lifecycle.renew(sid, "not-this-run")
    if move == "store_report":
        return lifecycle.store_report(sid, "not-this-run", copy.deepcopy(SAMPLE_REPORT))
    if move == "fail_infra":
        return lifecycle.fail_infra(sid, "not-this-run", "boom")
    if move == "report_progress":
        return lifecycle.report_progress(sid, "not-this-run", {"phase": "training", "logs": {}})
    if move == "replace":
        out = lifecycle.replace([sid], by=sid + 1000)
        db.session.commit()
        return out
    out = lifecycle.reset_for_regrade(sid)
    db.session.commit()
    return out


@pytest.mark.parametrize("move,state", CASES)
def test_a_move_from_the_wrong_state_changes_nothing_and_says_so(app, make_sub, move, state):
    sid = in_state(make_sub, app, state)
    with app.app_context():
        before = row(sid)
        result = attempt(move, sid)
        assert result in (None, False, [], "superseded")
        assert row(sid) == before


def test_mark_enqueued_takes_each_generation_once(app, make_sub):
    from server.extensions import db
    from server.grading import lifecycle
    from server.models import Submission

    sid = make_sub(status="queued")
    with app.app_context():
        stale = Submission(id=sid, enqueue_gen=0, status="queued")  # what a second process last read
        assert lifecycle.mark_enqueued(db.session.get(Submission, sid)) == f"sub-{sid}-g1"
        db.session.expunge_all()
        assert lifecycle.mark_enqueued(stale) is None
        assert row(sid)["enqueue_gen"] == 1 and row(sid)["job_id"] == f"sub-{sid}-g1"


def test_one_lease_one_report(app, make_sub):
    from server.grading import lifecycle

    sid, token = running(make_sub, app)
    with app.app_context():
        assert lifecycle.claim(sid) is None  # the lease is live
        assert lifecycle.renew(sid, token)
        assert lifecycle.store_report(sid, token, copy.deepcopy(SAMPLE_REPORT)) == "graded"
        assert lifecycle.store_report(sid, token, copy.deepcopy(SAMPLE_REPORT)) == "superseded"
        after = row(sid)
        assert (after["status"], after["results_stored"], after["grading_runs"]) == ("graded", 1, 1)
        assert not lifecycle.renew(sid, token)  # a stored run holds nothing any more


def test_an_expired_lease_can_be_claimed_again_and_the_old_run_cannot_store(app, make_sub):
    from server.extensions import db
    from server.grading import lifecycle
    from server.models import Submission, utcnow

    sid, old = running(make_sub, app)
    with app.app_context():
        db.session.get(Submission, sid).lease_until = utcnow() - timedelta(seconds=1)
        db.session.commit()
        new = lifecycle.claim(sid)
        assert new and new != old
        assert lifecycle.store_report(sid, old, copy.deepcopy(SAMPLE_REPORT)) == "superseded"
        assert lifecycle.store_report(sid, new, copy.deepcopy(SAMPLE_REPORT)) == "graded"
        assert row(sid)["grading_runs"] == 2 and row(sid)["results_stored"] == 1


def _expire_and_reclaim(app, sid: int) -> str:
    from server.extensions import db
    from server.grading import lifecycle
    from server.models import Submission, utcnow

    db.session.get(Submission, sid).lease_until = utcnow() - timedelta(seconds=1)
    db.session.commit()
    new = lifecycle.claim(sid)
    assert new
    return new


def test_a_run_that_lost_its_claim_cannot_overwrite_the_new_owners_progress(app, make_sub):
    from server.grading import lifecycle

    sid, old = running(make_sub, app)
    with app.app_context():
        assert lifecycle.report_progress(sid, old, {"phase": "training", "logs": {"rank0": "old"}})
        assert row(sid)["progress_json"]["logs"] == {"rank0": "old"}
        new = _expire_and_reclaim(app, sid)
        assert lifecycle.report_progress(sid, new, {"phase": "preflight", "logs": {}})
        assert not lifecycle.report_progress(sid, old, {"phase": "training", "logs": {"rank0": "stale"}})
        assert row(sid)["progress_json"] == {"phase": "preflight", "logs": {}}
        assert lifecycle.store_report(sid, new, copy.deepcopy(SAMPLE_REPORT)) == "graded"
        assert not lifecycle.report_progress(sid, new, {"phase": "training", "logs": {}})  # done is done
        assert row(sid)["progress_json"] == {"phase": "done", "logs": {}}


def test_the_workers_progress_writes_go_through_the_guard(app, make_sub, tmp_path):
    """task.py's two writers (the phase, the relayed snapshot) with a run whose lease was taken:
    the new owner's progress stays, and the stale run stops (its grader is killed)."""
    import subprocess
    import sys

    from server.grading import task

    sid, old = running(make_sub, app)
    with app.app_context():
        new = _expire_and_reclaim(app, sid)
        assert lifecycle_progress(sid, new)
        with pytest.raises(task.Cancelled):
            task._set_phase(sid, old, "waiting_gpu")
        assert row(sid)["progress_json"]["phase"] == "mine"
        progress = tmp_path / "progress.json"
        progress.write_text('{"phase": "training", "logs": {"rank0": "stale"}}')
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        with pytest.raises(task.Cancelled):
            task._wait_relaying_progress(proc, sid, progress, 60, task._Heartbeat(app, sid, old))
        assert proc.poll() is not None  # the stale run's grader is gone
        assert row(sid)["progress_json"]["phase"] == "mine"
        task._set_phase(sid, new, "starting")  # the owner's own writes still land
        assert row(sid)["progress_json"] == {"phase": "starting", "logs": {}}


def lifecycle_progress(sid: int, token: str) -> bool:
    from server.grading import lifecycle

    return lifecycle.report_progress(sid, token, {"phase": "mine", "logs": {}})


def test_an_infrastructure_failure_is_retried_once_then_ends_as_error(app, make_sub):
    from server.grading import lifecycle

    sid, token = running(make_sub, app)
    with app.app_context():
        assert lifecycle.fail_infra(sid, token, "grader timed out") == "retrying"
        first = row(sid)
        assert (first["status"], first["infra_retries"], first["run_token"]) == ("queued", 1, None)
        assert lifecycle.fail_infra(sid, token, "again") == "superseded"  # that run is over
        token = lifecycle.claim(sid)
        assert lifecycle.fail_infra(sid, token, "grader timed out again") == "error"
        last = row(sid)
        assert (last["status"], last["results_stored"], last["error_detail"]) == ("error", 0, "grader timed out again")
        assert last["finished_at"] is not None


def test_recover_expired_takes_only_dead_leases(app, make_sub):
    from server.extensions import db
    from server.grading import lifecycle
    from server.models import Submission, utcnow

    dead, _ = running(make_sub, app)
    alive, alive_token = running(make_sub, app)
    with app.app_context():
        db.session.get(Submission, dead).lease_until = utcnow() - timedelta(seconds=1)
        db.session.commit()
        before = row(alive)
        recovered = lifecycle.recover_expired()  # (the module's database is shared: look at ours)
        assert recovered[dead] == "retrying" and alive not in recovered
        assert row(alive) == before
        assert row(dead)["error_detail"] == lifecycle.INFRA_DETAIL_LOST_WORKER
        # A lease renewed after the reconciler looked is not taken from its live run.
        db.session.get(Submission, alive).lease_until = utcnow() - timedelta(seconds=1)
        db.session.commit()
        looked = utcnow() - timedelta(seconds=5)  # the reconciler's "now", before the lapse
        assert lifecycle.fail_infra(alive, alive_token, "lost", expired_before=looked) == "superseded"
        assert row(alive)["status"] == "running"


def test_replace_takes_a_running_submissions_lease(app, make_sub):
    from server.extensions import db
    from server.grading import lifecycle

    sid, token = running(make_sub, app)
    with app.app_context():
        assert lifecycle.replace([sid], by=999) == [sid]
        db.session.commit()
        assert (row(sid)["status"], row(sid)["replaced_by"]) == ("replaced", 999)
        assert not lifecycle.renew(sid, token)  # its heartbeat stops the run
        assert lifecycle.store_report(sid, token, copy.deepcopy(SAMPLE_REPORT)) == "superseded"


def review_report() -> dict:
    report = copy.deepcopy(SAMPLE_REPORT)
    report.update(status="needs_review", integrity={"computed_score": 4.0})
    return report


@pytest.mark.parametrize("report,outcome", [
    (SAMPLE_REPORT, "graded"),
    ({"status": "error", "staff_traceback": "Traceback: grader bug", "checks": []}, "crashed"),
    ("review", "graded"),
])
def test_each_move_writes_only_the_columns_it_declares(app, make_sub, report, outcome):
    from server.grading import lifecycle

    sid = make_sub(status="queued")
    with app.app_context():
        before = row(sid)
        token = lifecycle.claim(sid)
        claimed = row(sid)
        assert changed(before, claimed) <= set(lifecycle.CLAIM_WRITES)
        report = review_report() if report == "review" else copy.deepcopy(report)
        assert lifecycle.store_report(sid, token, report) == outcome
        assert changed(claimed, row(sid)) <= set(lifecycle.STORE_WRITES)
    sid, token = running(make_sub, app)
    with app.app_context():
        before = row(sid)
        assert lifecycle.report_progress(sid, token, {"phase": "training", "logs": {"rank0": "x"}})
        assert changed(before, row(sid)) <= set(lifecycle.PROGRESS_WRITES)
        for expected in ("retrying", "error"):
            before = row(sid)
            assert lifecycle.fail_infra(sid, token, "lost") == expected
            assert changed(before, row(sid)) <= set(lifecycle.INFRA_WRITES)
            token = lifecycle.claim(sid)


def test_a_regrade_puts_back_what_a_fresh_upload_has_but_the_kept_columns(app, make_sub):
    from server.extensions import db
    from server.grading import lifecycle

    fresh = row_of_new(make_sub, app)
    sid, token = running(make_sub, app)
    with app.app_context():
        assert lifecycle.fail_infra(sid, token, "lost") == "retrying"
        token = lifecycle.claim(sid)
        assert lifecycle.store_report(sid, token, review_report()) == "graded"
        graded = row(sid)
        assert lifecycle.reset_for_regrade(sid)
        db.session.commit()
        after = row(sid)
    cleared = set(lifecycle.regrade_reset())
    assert after["status"] == "queued"
    assert {c: after[c] for c in cleared} == {c: fresh[c] for c in cleared}
    assert {c: after[c] for c in lifecycle.KEPT_BY_REGRADE} == {c: graded[c] for c in lifecycle.KEPT_BY_REGRADE}
    assert after["grading_runs"] == 2 and after["review_status"] == "pending"
    # Every column a run writes is either cleared or kept on purpose, none forgotten.
    run_columns = set(lifecycle.CLAIM_WRITES + lifecycle.STORE_WRITES + lifecycle.INFRA_WRITES
                      + lifecycle.PROGRESS_WRITES) - {"status"}
    assert cleared | set(lifecycle.KEPT_BY_REGRADE) == run_columns
    # ... and the result is what a regrade has always cleared (pinned: the refactor changed no behaviour).
    assert cleared == {"score", "run_token", "lease_until", "infra_retries", "results_stored", "started_at",
                       "finished_at", "error_detail", "progress_json"}


def row_of_new(make_sub, app) -> dict:
    """A new upload's columns, as the upload stores it."""
    sid = make_sub(status="queued")
    with app.app_context():
        return row(sid)
