"""Shared fixtures: real redis-server, real SQL database, real service processes, real browser.

Nothing here is a mock: ``redis_server`` starts redis-server on a free port,
``app`` gets its own copy of a SQLite file migrated with Alembic and seeded once per
session (``DemoDatabases``), ``service`` starts gunicorn and a worker as separate
processes, and ``browser`` is Debian's Chromium driven by Playwright.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from server.ports import free_port, wait_for_port  # noqa: F401  (tests import them from here)

REPO = Path(__file__).resolve().parent.parent
# Workers started by tests grade in fast mode or on test assignments: measuring the reference's speed at
# their start-up (minutes of torchrun) would only load the CI machine. The calibration tests call it directly.
os.environ.setdefault("DISTGRADE_CALIBRATE", "0")
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


class RedisServer:
    """A real redis-server process without persistence, restartable on the same port."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


class DemoDatabases:
    """Migrated SQLite files with the demo course seeded: made once per assignments folder, copied per test.

    Migrating and seeding (three password hashes) cost 1-2 s per test; copying the file costs a
    millisecond and gives each test the same fresh database. Seeding publishes what the assignments
    folder holds, so the key is that folder and the bytes of its ``assignment.json`` files: a test with
    its own folder, or one that edits a file, gets a template of its own.
    """

    session: DemoDatabases | None = None  # the session's, for helpers that are not fixtures (``Service.seed``)

    def __init__(self, root: Path):
        self.root = root
        self._made: dict[tuple, Path] = {}

    @staticmethod
    def key(assignments_dir: str | None) -> tuple:
        from coursework import settings

        folder = Path(assignments_dir) if assignments_dir else settings.repo_root() / "assignments"
        files = sorted(folder.glob("*/assignment.json")) if folder.is_dir() else []
        return (str(folder.resolve()), tuple((f.parent.name, f.read_bytes()) for f in files))

    def copy_to(self, dest: Path, assignments_dir: str | None) -> None:
        """Write a fresh migrated, seeded database at ``dest`` (0600; ``create_app`` makes its folder 0700)."""
        key = self.key(assignments_dir)
        if key not in self._made:
            self._made[key] = self._make(self.root / f"demo{len(self._made)}.db", assignments_dir)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._made[key], dest)
        os.chmod(dest, 0o600)

    @staticmethod
    def _make(path: Path, assignments_dir: str | None) -> Path:
        import sqlite3

        from flask_migrate import upgrade

        from server import create_app
        from server.extensions import db

        saved = os.environ.get("DISTGRADE_ASSIGNMENTS_DIR")
        if assignments_dir:
            os.environ["DISTGRADE_ASSIGNMENTS_DIR"] = assignments_dir
        else:
            os.environ.pop("DISTGRADE_ASSIGNMENTS_DIR", None)
        try:
            app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{path}",
                              "REDIS_URL": "redis://127.0.0.1:1/0", "VAR_DIR": str(path.parent / "var"),
                              "SECRET_KEY": "template"})
            with app.app_context():
                upgrade()
                result = app.test_cli_runner().invoke(args=["seed-demo"])
                assert result.exit_code == 0, result.output
                db.session.remove()
                db.engine.dispose()
        finally:
            if saved is None:
                os.environ.pop("DISTGRADE_ASSIGNMENTS_DIR", None)
            else:
                os.environ["DISTGRADE_ASSIGNMENTS_DIR"] = saved
        with sqlite3.connect(path) as conn:  # fold the WAL into the file: the copy is the file alone
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        wal = Path(f"{path}-wal")
        assert not wal.exists() or wal.stat().st_size == 0, "the template's WAL was not folded in"
        return path


# The tests' password hash: one PBKDF2 round. The service's own is werkzeug's default (scrypt, N=32768), 0.12 CPU
# seconds for each hash and each check on the CI host: in 122 server tests, 71 hashes and 152 checks cost 29 of
# their 333 s. Only this process's ``server.models`` is patched (the session's demo databases and every user a test
# creates here); a service a test starts as a subprocess hashes as in production, and a check reads the method
# from the stored hash, so a wrong password is still refused whichever method made it.
TEST_PASSWORD_HASH = "pbkdf2:sha256:1"


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashes() -> Iterator[None]:
    import functools

    from werkzeug.security import generate_password_hash

    from server import models

    patch = pytest.MonkeyPatch()
    patch.setattr(models, "generate_password_hash", functools.partial(generate_password_hash, method=TEST_PASSWORD_HASH))
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def demo_databases(tmp_path_factory) -> Iterator[DemoDatabases]:
    """The session's templates (none is made until a test asks for a database)."""
    DemoDatabases.session = DemoDatabases(tmp_path_factory.mktemp("demo-db"))
    yield DemoDatabases.session
    DemoDatabases.session = None


@pytest.fixture
def app(tmp_path, redis_server, demo_databases):
    """A fresh app on a migrated SQLite database with the demo course seeded (a copy of the session's template)."""
    from server import create_app

    var = tmp_path / "var"
    demo_databases.copy_to(var / "test.db", os.environ.get("DISTGRADE_ASSIGNMENTS_DIR"))
    app = create_app({
        "TESTING": True,
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{var / 'test.db'}",
        "REDIS_URL": redis_server.url,
        "VAR_DIR": str(var),
        "WTF_CSRF_ENABLED": False,
        "SECRET_KEY": "test",
    })
    redis_server_flush(redis_server)
    yield app


def redis_server_flush(server: RedisServer) -> None:
    import redis

    from server.grading.queue import redis_recovered

    redis.Redis.from_url(server.url).flushall()
    redis_recovered()  # a Redis stopped by an earlier test is not skipped in this one


@pytest.fixture
def client(app):
    return app.test_client()


class AuthActions:
    def __init__(self, client):
        self._client = client

    def login(self, username: str = "alice", password: str = "alice-pass"):
        return self._client.post("/login", data={"username": username, "password": password})

    def logout(self):
        return self._client.post("/logout")


@pytest.fixture
def auth(client):
    return AuthActions(client)


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Service:
    """The real service: gunicorn web + RQ worker processes on a migrated database."""

    def __init__(self, tmp: Path, redis_url: str, extra_env: dict[str, str] | None = None):
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp / 'svc.db'}", REDIS_URL=redis_url,
                        DISTGRADE_VAR_DIR=str(tmp / "var"), SECRET_KEY="svc-test-only-secret-key-0123456789", LEASE_S="6",
                        RECONCILE_EVERY_S="1", PYTHONUNBUFFERED="1",
                        DISTGRADE_DEMO_PASSWORDS="published", **(extra_env or {}))
        self.procs: dict[str, subprocess.Popen] = {}

    def flask(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "flask", "--app", "server", *args], env=self.env,
                             cwd=REPO, capture_output=True, text=True, check=True)
        return out.stdout

    def seed(self, databases: DemoDatabases | None = None) -> None:
        """What ``flask db upgrade`` and ``flask seed-demo`` make for this service, as a copy of the template."""
        databases = databases or DemoDatabases.session
        assert databases is not None, "Service.seed needs the demo_databases session fixture"
        databases.copy_to(self.tmp / "svc.db", self.env.get("DISTGRADE_ASSIGNMENTS_DIR"))

    def start_web(self, tls: tuple[Path, Path] | None = None) -> None:
        """gunicorn on 127.0.0.1; with ``tls`` (certificate, key files) over HTTPS, reached as https://localhost."""
        extra = ["--certfile", str(tls[0]), "--keyfile", str(tls[1])] if tls else []
        if tls:
            self.url = f"https://localhost:{self.port}"
        self.procs["web"] = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", "2", "--threads", "4", "-b", f"127.0.0.1:{self.port}", *extra,
             "server.wsgi:app"], env=self.env, cwd=REPO, start_new_session=True,
            stdout=open(self.tmp / "web.log", "ab"), stderr=subprocess.STDOUT)
        wait_for_port(self.port)

    def start_worker(self, name: str = "worker") -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "server.grading.worker"], env=self.env, cwd=REPO,
                                start_new_session=True, stdout=open(self.tmp / f"{name}.log", "ab"),
                                stderr=subprocess.STDOUT)
        self.procs[name] = proc
        return proc

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal a started process and every descendant (RQ's work horse runs in its own session)."""
        proc = self.procs.pop(name)
        for pid in [proc.pid, *descendants(proc.pid)]:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        proc.wait()

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)


@pytest.fixture
def service(tmp_path, redis_server, demo_databases) -> Iterator[Service]:
    redis_server_flush(redis_server)
    svc = Service(tmp_path, redis_server.url)
    svc.seed(demo_databases)
    yield svc
    svc.stop()


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright (no browser download)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(locale="zh-CN")
    pg = context.new_page()
    yield pg
    context.close()


@pytest.fixture(scope="session")
def nbgrader_templates(tmp_path_factory):
    """``share(var_dir)``: make ``var_dir/nbgrader`` the session's one folder of generated nbgrader courses.

    A grading builds the course from homework 2's source notebook once per ``DISTGRADE_VAR_DIR`` and copies
    it for every job after (``graders.config_annotation.notebook._template``), as a worker does with its own
    var folder. Tests that grade notebooks with a var folder each regenerated it every time
    (``generate_assignment`` with nbgrader's Alembic gradebook: 3.3 CPU seconds and 20 s of wall on the
    loaded 2-core host, per notebook graded). Shared, the first notebook graded builds it (``_template``
    keeps the first of two that race, as two workers would), keyed as before by the notebook's bytes and
    nbgrader's version; ``test_committed_release_is_what_nbgrader_generates`` still generates on its own."""
    templates = tmp_path_factory.mktemp("nbgrader-templates")

    def share(var_dir: Path) -> Path:
        var_dir.mkdir(parents=True, exist_ok=True)
        link = var_dir / "nbgrader"
        if not link.exists():
            link.symlink_to(templates, target_is_directory=True)
        return var_dir
    return share


@pytest.fixture
def annotation_readings_trusted(monkeypatch):
    """Homework 2 as graded where every field's reading has earned the teachers' trust:
    the worker names the trusted fields in ``DISTGRADE_TRUSTED_READINGS``; this names them all, for
    every kind of verdict, so a note's points (full, partial or zero) count at once as they did before
    trust existed. For tests of flows that come after trust (asking about a counted field, part C of the notebook); the shipped default, where nothing
    is trusted yet, has its own tests (``tests/graders/test_config_annotation_trust.py``)."""
    import json as _json

    from coursework.config_annotation import catalogue
    from graders.config_annotation import core

    from coursework.trust import KINDS

    cat = catalogue.load()
    every = [f"{d}:{p}:{k}" for d in cat.raw["fields"] for p in cat.fields(d) for k in KINDS]
    monkeypatch.setenv(core.TRUSTED_ENV, _json.dumps(every))
    return every
