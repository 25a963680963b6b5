"""The model layer and migrations on a real PostgreSQL server started by the test.

Scale-out uses PostgreSQL through ``DATABASE_URL``; SQLite is only the embedded
default. This runs the Alembic migrations, the demo seed, the enqueue
compare-and-set and the worker's claim/store path against PostgreSQL.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import free_port, wait_for_port

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))


def _pg_tool(name: str) -> str | None:
    candidate = PG_BIN / name
    return str(candidate) if candidate.exists() else shutil.which(name)


def _as_postgres_user() -> list[str]:
    """PostgreSQL refuses to run as root: drop to the postgres (or nobody) account."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return ["runuser", "-u", name, "--"]
        except KeyError:
            continue
    pytest.skip("running as root with no unprivileged account for PostgreSQL")


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = _pg_tool("initdb"), _pg_tool("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    pytest.importorskip("psycopg")
    # pytest's tmp dirs are private to root; the server's account needs its own directory.
    base = Path(tempfile.mkdtemp(prefix="distgrade-pg-"))
    data = base / "data"
    prefix = _as_postgres_user()
    if prefix:
        shutil.chown(base, user=prefix[2])
    subprocess.run(prefix + [initdb, "-D", str(data), "-U", "distgrade", "--auth=trust", "-E", "UTF8"],
                   check=True, capture_output=True)
    port = free_port()
    subprocess.run(prefix + [pg_ctl, "-D", str(data), "-l", str(base / "pg.log"), "-w", "-o",
                             f"-p {port} -k {base} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)
    wait_for_port(port)
    subprocess.run(prefix + [str(PG_BIN / "createdb") if (PG_BIN / "createdb").exists() else "createdb",
                             "-h", "127.0.0.1", "-p", str(port), "-U", "distgrade", "distgrade"],
                   check=True, capture_output=True)
    yield f"postgresql://distgrade@127.0.0.1:{port}/distgrade"
    subprocess.run(prefix + [pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _published_demo_passwords(monkeypatch):
    """A deployment's settings (not TESTING) with the tests' demo accounts: both tests share one database."""
    monkeypatch.setenv("DISTGRADE_DEMO_PASSWORDS", "published")


def test_migrations_seed_and_grading_cas_on_postgres(postgres_url, redis_server, tmp_path):
    from flask_migrate import upgrade

    from server import create_app
    from server.extensions import db
    from server.models import Submission, User
    from server.grading.queue import enqueue
    from server.grading.lifecycle import claim, store_report

    app = create_app({"SQLALCHEMY_DATABASE_URI": postgres_url, "REDIS_URL": redis_server.url,
                      "VAR_DIR": str(tmp_path)})
    with app.app_context():
        assert db.engine.dialect.name == "postgresql"
        upgrade()
        assert app.test_cli_runner().invoke(args=["seed-demo"]).exit_code == 0
        alice = db.session.scalar(db.select(User).where(User.username == "alice"))
        data = "print('hi')\n".encode()
        sub = Submission(user_id=alice.id, course_id=alice.memberships[0].course_id, assignment_id="probe",
                         filename="a.py", content=data, sha256=Submission.digest(data), size=len(data))
        db.session.add(sub)
        db.session.commit()
        assert enqueue(sub) == f"sub-{sub.id}-g1"
        stale = Submission(id=sub.id, enqueue_gen=0, status="queued", resource="cpu")
        assert enqueue(stale) is None  # a second enqueuer loses the compare-and-set

        token = claim(sub.id)
        assert token and claim(sub.id) is None  # one lease at a time
        report = {"status": "graded", "score": 1.0, "max_score": 2.0, "checks": []}
        assert store_report(sub.id, token, report) == "graded"
        assert store_report(sub.id, token, report) == "superseded"  # stored exactly once
        db.session.expire_all()
        row = db.session.get(Submission, sub.id)
        assert (row.status, row.score, row.results_stored, row.report_json["max_score"]) == ("graded", 1.0, 1, 2.0)


def test_quiz_page_and_answers_on_postgres(postgres_url, redis_server, tmp_path):
    from flask_migrate import upgrade

    from server import create_app
    from server.extensions import db
    from server.quiz.models import QuizAttempt

    app = create_app({"SQLALCHEMY_DATABASE_URI": postgres_url, "REDIS_URL": redis_server.url,
                      "VAR_DIR": str(tmp_path), "WTF_CSRF_ENABLED": False})
    with app.app_context():
        upgrade()
        assert app.test_cli_runner().invoke(args=["seed-demo"]).exit_code == 0
    client = app.test_client()
    assert client.post("/login", data={"username": "bob", "password": "bob-pass"}).status_code == 302
    attempt_id = int(client.post("/quiz/ch7_3_selftest/start").headers["Location"].rstrip("/").split("/")[-1])

    def answer(pos: int, text: str):
        resp = client.post(f"/quiz/attempt/{attempt_id}/answer/{pos}?lang=en", data={"answer": text},
                           headers={"Accept": "application/json"})
        return resp.status_code, resp.get_json()

    assert client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True).count('class="qform"') == 6
    assert answer(0, "data parallel: throughput; model parallel: capacity")[0] == 200
    code, body = answer(1, "like one card with the large batch")
    assert code == 200 and 0 < body["score"] < 1
    assert answer(1, "again")[1]["error"] == "already_answered"  # the unique index, on PostgreSQL
    page = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert page.count('class="qform"') == 4 and body["card_html"] in page  # the aggregated answer list
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    assert answer(2, "ZeRO-3 shards parameters")[1]["error"] == "attempt_closed"
    with app.app_context():
        att = db.session.get(QuizAttempt, attempt_id)
        assert att.status == "submitted" and len(att.answers) == 2
        assert att.score == round(1 + body["score"], 4)
