"""``./distgrade up``'s supervisor: it serves, and stopping it leaves no process behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from server.commands import demo_accounts
from tests.conftest import descendants, free_port

REPO = Path(__file__).resolve().parents[2]


def start_supervisor(tmp_path: Path, port: int | None = None, **extra: str) -> tuple[subprocess.Popen, int]:
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(PORT=str(port), DISTGRADE_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1", **extra)
    proc = subprocess.Popen([sys.executable, "-m", "server.supervisor"], cwd=REPO, env=env,
                            stdout=open(tmp_path / "sup.log", "ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120  # migrations and the seed take a minute on a busy 2-core host
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2) as resp:
                if resp.status == 200:
                    return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError((tmp_path / "sup.log").read_text()[-3000:])


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(pid)
    return out


def wait_gone(pids: list[int], timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(pids)


@pytest.mark.parametrize("sig", [signal.SIGKILL], ids=["sigkill"])  # Ctrl-C: the restart test below
def test_supervisor_serves_and_leaves_nothing_behind(tmp_path, sig):
    proc, port = start_supervisor(tmp_path)
    children = descendants(proc.pid)
    assert len(children) >= 4  # redis, gunicorn master + workers, grading worker
    log = (tmp_path / "sup.log").read_text()
    accounts = demo_accounts(tmp_path / "var")  # generated, printed once, kept for the operator only
    assert set(accounts) == {"teacher", "alice", "bob"} and accounts["alice"] != "alice-pass"
    assert f"alice / {accounts['alice']}" in log and f"http://127.0.0.1:{port}/" in log
    assert oct((tmp_path / "var" / "demo-accounts.txt").stat().st_mode & 0o777) == "0o600"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert wait_gone(children) == [], (tmp_path / "sup.log").read_text()[-2000:]


def _child_named(proc: subprocess.Popen, word: str) -> int | None:
    for pid in descendants(proc.pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if word in cmd:
            return pid
    return None


def _serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_a_dead_child_is_restarted_and_the_site_stays_up(tmp_path):
    """A Redis killed from outside (the OOM killer, an operator) used to stop the whole service.
    Then Ctrl-C stops everything, the restarted children included."""
    proc, port = start_supervisor(tmp_path)
    stopped = False
    try:
        redis = _child_named(proc, "redis-server")
        assert redis is not None
        os.kill(redis, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (_child_named(proc, "redis-server") in (None, redis)):
            time.sleep(0.3)
        assert proc.poll() is None, (tmp_path / "sup.log").read_text()[-2000:]
        assert _child_named(proc, "redis-server") not in (None, redis)
        assert _serves(port)
        web = _child_named(proc, "gunicorn")
        os.killpg(web, signal.SIGKILL)  # the whole web server, master and workers
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _serves(port):
            time.sleep(0.5)
        assert _serves(port), (tmp_path / "sup.log").read_text()[-2000:]
        log = (tmp_path / "sup.log").read_text()
        assert "redis exited with -9; restarting" in log and "web exited with -9; restarting" in log
        status = json.loads((tmp_path / "var" / "supervisor.json").read_text())
        assert status["redis"]["restarts"] == 1 and status["web"]["restarts"] == 1
        children = descendants(proc.pid)
        before = len((tmp_path / "sup.log").read_bytes())
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        stopped = True
        assert wait_gone(children) == [], (tmp_path / "sup.log").read_text()[-2000:]
        stop_log = (tmp_path / "sup.log").read_bytes()[before:].decode(errors="replace")
        assert "Traceback" not in stop_log and "ConnectionError" not in stop_log, stop_log[-3000:]  # Ctrl-C is quiet
    finally:
        if not stopped:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)


def _grading_worker(proc: subprocess.Popen) -> int | None:
    return _child_named(proc, "server.grading.worker")


def test_a_killed_supervisor_is_counted_and_its_orphans_stopped(tmp_path):
    """The supervisor SIGKILLed mid-grading: its workers got SIGTERM and RQ finished the job in hand,
    orphans grading beside the next supervisor's workers (three gradings with WORKERS=2), and the
    next supervisor started its counts from nothing. Now it keeps the counts, counts the death,
    and stops the orphans; their job's lease runs out and it is retried, costing no attempt."""
    fixtures = REPO / "tests" / "fixtures"
    env = dict(DISTGRADE_ASSIGNMENTS_DIR=str(fixtures / "assignments"), LEASE_S="6", RECONCILE_EVERY_S="1",
               PYTHONPATH=os.pathsep.join([str(fixtures), os.environ.get("PYTHONPATH", "")]),
               DISTGRADE_CALIBRATE="0")
    first, port = start_supervisor(tmp_path, **env)
    second = None
    try:
        redis_pid = _child_named(first, "redis-server")
        os.kill(redis_pid, signal.SIGKILL)  # one restart counted before the supervisor dies
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _child_named(first, "redis-server") in (None, redis_pid):
            time.sleep(0.3)
        from server import create_app
        from tests.server.grading.test_worker import rows, submit, wait_until

        var = tmp_path / "var"
        app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{var / 'distgrade.db'}",
                          "REDIS_URL": f"unix://{var / 'redis.sock'}", "VAR_DIR": str(var), "LEASE_S": 6})
        sid = submit(app, "sleep 300")
        wait_until(lambda: rows(app, [sid])[sid].status == "running", 60, "the grading to start")
        orphan = _grading_worker(first)
        first.send_signal(signal.SIGKILL)
        first.wait()
        time.sleep(1)
        assert alive([orphan]) == [orphan]  # RQ's warm shutdown: it would finish the job first
        second, _ = start_supervisor(tmp_path, port=port, **env)
        assert wait_gone([orphan], 10) == [], "the dead supervisor's worker still grades"
        status = json.loads((var / "supervisor.json").read_text())
        assert status["supervisor"]["restarts"] == 1 and status["supervisor"]["orphans_stopped"] >= 1
        assert status["redis"]["restarts"] == 1  # kept across the supervisor's own restart
        assert "died without stopping" in (tmp_path / "sup.log").read_text()
    finally:
        for proc in (second, first):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=30)
