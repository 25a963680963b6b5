"""A bounded HTTP load generator for loopback servers, and gunicorn launchers for comparisons.

Each simulated client keeps one keep-alive connection and sends a fixed number of
requests, so a run always ends by itself; the whole run also stops at a
deadline. Only 127.0.0.1 is ever targeted.
"""
from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from bench.common import free_port, percentile, print_table, wait_for_port

REPO = Path(__file__).resolve().parent.parent
GUNICORN_SETTINGS = ["-w", "2", "--threads", "8", "--worker-class", "gthread", "--keep-alive", "5"]


@dataclass
class LoadResult:
    """Latencies (ms) and throughput of one run."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0

    @property
    def throughput(self) -> float:
        return len(self.latencies_ms) / self.wall_s if self.wall_s else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


# A request is (method, path, body, headers); a client factory builds them per client.
Request = tuple[str, str, bytes | None, dict[str, str]]


def run_load(port: int, requests_for_client: Callable[[int], list[Request]], clients: int = 50,
             deadline_s: float = 60.0) -> LoadResult:
    """Run ``clients`` concurrent keep-alive clients against 127.0.0.1:port."""
    result = LoadResult()
    lock = threading.Lock()
    stop_at = time.monotonic() + deadline_s
    start_gate = threading.Barrier(clients + 1)

    def client(i: int) -> None:
        plan = requests_for_client(i)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        start_gate.wait()
        local, errors = [], 0
        for method, path, body, headers in plan:
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
    t0 = time.perf_counter()
    for t in threads:
        t.join(timeout=deadline_s + 15)
    result.wall_s = time.perf_counter() - t0
    return result


@contextmanager
def gunicorn(app_spec: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """Serve ``app_spec`` with the benchmark's gunicorn settings; yields the port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", *GUNICORN_SETTINGS, "-b", f"127.0.0.1:{port}",
                             app_spec], cwd=REPO, env=dict(os.environ, **(env or {})),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout=60)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def print_vs_bare(title: str, bare: LoadResult, label: str, other: LoadResult) -> None:
    """The side-by-side table of one endpoint against the bare baseline, and the shared goal."""
    ratio = other.throughput / bare.throughput
    rows = [["bare Flask /ping", bare.throughput, bare.p(50), bare.p(99), bare.errors, ""],
            [label, other.throughput, other.p(50), other.p(99), other.errors, f"{ratio:.2f}x"]]
    print_table(title, ["endpoint", "req/s", "p50 ms", "p99 ms", "errors", "vs bare"], rows)
    ok = ratio >= 0.5 and other.p(99) < 100 and other.errors == 0
    print(f"\n  goal: >= 0.5x bare throughput and p99 < 100 ms -> {'ok' if ok else 'MISSED'}")


def prepare_database(env: dict[str, str], script: str) -> str:
    """Migrate and seed a fresh database, then run ``script`` in the app's context; returns its output."""
    flask = [sys.executable, "-m", "flask", "--app", "server"]
    subprocess.run(flask + ["db", "upgrade"], env=env, cwd=REPO, check=True, capture_output=True)
    subprocess.run(flask + ["seed-demo"], env=env, cwd=REPO, check=True, capture_output=True)
    code = "from server import create_app\nfrom server.extensions import db\napp = create_app()\n" + script
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, check=True, capture_output=True,
                          text=True).stdout
