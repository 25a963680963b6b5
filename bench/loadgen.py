"""A bounded HTTP load generator for loopback servers, and gunicorn launchers for comparisons.

Each simulated client keeps one keep-alive connection and sends a fixed number of
requests, so a run always ends by itself; the whole run also stops at a
deadline. Only 127.0.0.1 is ever targeted.
"""
from __future__ import annotations

import http.client
import os
import random
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from bench.common import percentile, print_table
from server.ports import free_port, wait_for_port

REPO = Path(__file__).resolve().parent.parent
TREE_ENV = "BENCH_TREE"  # in a server's env: serve that checkout instead of this one (before/after in one run)


def tree_of(env: dict[str, str] | None) -> Path:
    """The checkout a server or app process runs from: ``BENCH_TREE`` in its env, else this one."""
    return Path((env or {}).get(TREE_ENV) or REPO)
GUNICORN_SETTINGS = ["-w", "2", "--threads", "8", "--worker-class", "gthread", "--keep-alive", "5"]


@dataclass
class LoadResult:
    """Latencies (ms) and throughput of one run."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0
    server_cpu_s: float | None = None  # CPU time the server's processes spent during the run
    sql_per_request: float | None = None  # SQL statements one request runs (``sql_statements``)

    @property
    def server_cpu_ms_per_request(self) -> float | None:
        n = len(self.latencies_ms) + self.errors
        return None if self.server_cpu_s is None or not n else self.server_cpu_s / n * 1000

    @property
    def throughput(self) -> float:
        return len(self.latencies_ms) / self.wall_s if self.wall_s else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


# A request is (method, path, body, headers); a client factory builds them per client.
Request = tuple[str, str, bytes | None, dict[str, str]]


class Server(NamedTuple):
    port: int
    pid: int


def process_tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its children (gunicorn's master and workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for p in [pid, *map(int, children)]:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run_load(server: Server, requests_for_client: Callable[[int], list[Request]], clients: int = 50,
             deadline_s: float = 60.0, think_s: float = 0.0) -> LoadResult:
    """Run ``clients`` concurrent keep-alive clients against the server on 127.0.0.1.

    With ``think_s`` each client pauses a random 0.5-1.5x ``think_s`` before every request, like a
    person reading (so a class also arrives spread out); without it the clients send back to
    back from the same instant (the server runs saturated).
    """
    port = server.port
    result = LoadResult()
    lock = threading.Lock()
    stop_at = time.monotonic() + deadline_s
    start_gate = threading.Barrier(clients + 1)

    def client(i: int) -> None:
        plan = requests_for_client(i)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        pause = random.Random(i)
        start_gate.wait()
        local, errors = [], 0
        for method, path, body, headers in plan:
            if think_s:
                time.sleep(think_s * pause.uniform(0.5, 1.5))
            if time.monotonic() > stop_at:
                break
            t0 = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                ok = resp.status < 400
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            dt = (time.perf_counter() - t0) * 1000
            if ok:
                local.append(dt)
            else:
                errors += 1
        conn.close()
        with lock:
            result.latencies_ms.extend(local)
            result.errors += errors

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start_gate.wait()
    t0, cpu0 = time.perf_counter(), process_tree_cpu_s(server.pid)
    for t in threads:
        t.join(timeout=deadline_s + 15)
    result.wall_s = time.perf_counter() - t0
    result.server_cpu_s = process_tree_cpu_s(server.pid) - cpu0
    return result


@contextmanager
def gunicorn(app_spec: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """Serve ``app_spec`` with the benchmark's gunicorn settings; yields its port and pid."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", *GUNICORN_SETTINGS, "-b", f"127.0.0.1:{port}",
                             app_spec], cwd=tree_of(env), env=dict(os.environ, **(env or {})),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout=60)
        yield Server(port, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)  # gunicorn's graceful stop; a loaded host may take longer
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def meets_goal(bare: LoadResult, other: LoadResult) -> bool:
    """The web goal: >= 0.5x the bare endpoint's throughput, p99 < 100 ms, no errors."""
    return other.throughput / bare.throughput >= 0.5 and other.p(99) < 100 and other.errors == 0


def print_vs_bare(title: str, bare: LoadResult, measured: list[tuple[str, LoadResult, bool]]) -> None:
    """The side-by-side table of endpoints against the bare baseline; ``measured`` holds
    (label, result, whether the goal applies to it), and the goal line names each one it applies to."""
    def cpu(r: LoadResult) -> str:
        ms = r.server_cpu_ms_per_request
        return "" if ms is None else f"{ms:.3f}"

    def sql(r: LoadResult) -> str:
        return "" if r.sql_per_request is None else f"{r.sql_per_request:g}"

    rows = [["bare Flask /ping", bare.throughput, bare.p(50), bare.p(99), bare.errors, cpu(bare), "0", ""]]
    rows += [[label, r.throughput, r.p(50), r.p(99), r.errors, cpu(r), sql(r), f"{r.throughput / bare.throughput:.2f}x"]
             for label, r, _ in measured]
    print_table(title, ["endpoint", "req/s", "p50 ms", "p99 ms", "errors", "server CPU ms/req", "SQL/req", "vs bare"],
                rows)
    print("\n  goal: >= 0.5x bare throughput and p99 < 100 ms")
    for label, r, applies in measured:
        verdict = ("ok" if meets_goal(bare, r) else "MISSED") if applies else "(shown for reference)"
        print(f"    {label}: {verdict}")


_COUNT_SQL = """
import json, statistics, sys
from sqlalchemy import event
from server import create_app
from server.extensions import db
app = create_app()
with app.app_context():
    engine = db.engine
n = [0]
event.listen(engine, "before_cursor_execute", lambda *a: n.__setitem__(0, n[0] + 1))
client = app.test_client()
counts = []
for method, path, body, headers in json.loads(sys.stdin.read()):
    for pair in filter(None, headers.pop("Cookie", "").split("; ")):  # the test client keeps its own jar
        client.set_cookie(*pair.split("=", 1))
    n[0] = 0
    resp = client.open(path, method=method, data=body.encode("latin-1") if body else None, headers=headers)
    if resp.status_code >= 400:
        raise SystemExit(f"{method} {path}: HTTP {resp.status_code}")
    counts.append(n[0])
print(json.dumps(counts))
"""


def sql_statements(env: dict[str, str], plan: list[Request]) -> float:
    """The median number of SQL statements each request of ``plan`` runs, counted in the app's own
    engine (in a separate process on the same database, through Flask's test client): a loop of
    queries per request shows at once, whatever the host's load does to the timings."""
    import json
    import statistics

    wire = [(m, p, b.decode("latin-1") if b else None, h) for m, p, b, h in plan]
    done = subprocess.run([sys.executable, "-c", _COUNT_SQL], input=json.dumps(wire), env=env, cwd=tree_of(env),
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"counting SQL statements failed: {done.stderr[-2000:]}")
    out = done.stdout
    return float(statistics.median(json.loads(out.strip().splitlines()[-1])))


def prepare_database(env: dict[str, str], script: str) -> str:
    """Migrate and seed a fresh database, then run ``script`` in the app's context; returns its output."""
    flask = [sys.executable, "-m", "flask", "--app", "server"]
    repo = tree_of(env)
    subprocess.run(flask + ["db", "upgrade"], env=env, cwd=repo, check=True, capture_output=True)
    subprocess.run(flask + ["seed-demo"], env=dict(env, DISTGRADE_DEMO_PASSWORDS="published"), cwd=repo, check=True,
                   capture_output=True)
    code = "from server import create_app\nfrom server.extensions import db\napp = create_app()\n" + script
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=repo, check=True, capture_output=True,
                          text=True).stdout
