"""Cost of the sandbox on a real 2-rank gloo torchrun job: raw vs sandboxed, interleaved pairs.

Each pair runs the same script once directly and once through ``graders.sandbox.run``
(bwrap, unprivileged uid, cgroup, watch loop), in alternating order so that drift in
machine load hits both sides alike. Reported: median wall time of each side, the
median of per-pair ratios (goal <= 1.05x) and the rank-0 time spent in the
all_reduce/compute loop (steady-state cost, without start-up).

Run: ``.venv/bin/python -m bench.sandbox_overhead`` (root, for the full sandbox).
``BENCH_PAIRS`` (default 5) and ``BENCH_STEPS`` (default 600) size it.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import print_table
from graders import sandbox, workspace

PAIRS = int(os.environ.get("BENCH_PAIRS", "5"))
STEPS = int(os.environ.get("BENCH_STEPS", "600"))
SCRIPT = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
x, buf = torch.randn(384, 384), torch.randn(1 << 18)
t0 = time.perf_counter()
for _ in range(int(sys.argv[1])):
    y = x @ x
    dist.all_reduce(buf)
    dist.all_reduce(y)
dist.barrier()
if rank == 0:
    print(f"loop_s={time.perf_counter() - t0:.4f}", flush=True)
dist.destroy_process_group()
"""


def _argv() -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "allreduce.py", str(STEPS)]


def _env() -> dict[str, str]:
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1", "LANG": "C.UTF-8"}


def _loop_s(stdout: str) -> float:
    m = re.search(r"loop_s=([0-9.]+)", stdout)
    return float(m.group(1)) if m else float("nan")


def run_raw(workdir: Path) -> tuple[float, float]:
    """Wall time and loop time of one unsandboxed run."""
    start = time.monotonic()
    p = subprocess.run(_argv(), cwd=workdir, env=_env(), capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - start
    if p.returncode != 0:
        raise RuntimeError(f"raw run failed: {p.stderr[-2000:]}")
    return wall, _loop_s(p.stdout)


def run_sandboxed(workdir: Path) -> tuple[float, float, list[str]]:
    """Wall time, loop time and layers of one sandboxed run."""
    start = time.monotonic()
    r = sandbox.run(_argv(), workdir=workdir, env=_env(),
                    limits=sandbox.Limits(wall_s=600, address_space=False))
    wall = time.monotonic() - start
    if r.returncode != 0:
        raise RuntimeError(f"sandboxed run failed ({r.killed_reason}): {r.stderr[-2000:]}")
    return wall, _loop_s(r.stdout), r.layers


def fixed_cost(workdir: Path, n: int = 15) -> tuple[float, float]:
    """Median wall time of ``/bin/true`` raw and sandboxed: the per-run set-up cost."""
    raw, sb = [], []
    for _ in range(n):
        start = time.monotonic()
        subprocess.run(["/bin/true"], cwd=workdir, env=_env(), check=True)
        raw.append(time.monotonic() - start)
        start = time.monotonic()
        sandbox.run(["/bin/true"], workdir=workdir, env=_env(), limits=sandbox.Limits(wall_s=60))
        sb.append(time.monotonic() - start)
    return statistics.median(raw), statistics.median(sb)


def main() -> int:
    rows, ratios, raw_walls, sb_walls, raw_loops, sb_loops = [], [], [], [], [], []
    layers: list[str] = []
    with workspace.job_dir("bench") as job:
        work = job / "run"
        work.mkdir()
        (work / "allreduce.py").write_text(SCRIPT)
        true_raw, true_sb = fixed_cost(work)
        run_raw(work)  # warm the page cache for torch's import before measuring
        for i in range(PAIRS):
            if i % 2 == 0:
                raw, sb = run_raw(work), run_sandboxed(work)
            else:
                sb, raw = run_sandboxed(work), run_raw(work)
            layers = sb[2]
            raw_walls.append(raw[0]); sb_walls.append(sb[0])
            raw_loops.append(raw[1]); sb_loops.append(sb[1])
            ratios.append(sb[0] / raw[0])
            rows.append([i + 1, raw[0], sb[0], sb[0] / raw[0], raw[1], sb[1]])
        shutil.rmtree(work, ignore_errors=True)
    rows.append(["median", statistics.median(raw_walls), statistics.median(sb_walls),
                 statistics.median(ratios), statistics.median(raw_loops), statistics.median(sb_loops)])
    print_table(f"2-rank gloo torchrun, {STEPS} steps, {PAIRS} interleaved pairs (seconds)",
                ["pair", "raw_wall", "sandbox_wall", "ratio", "raw_loop", "sandbox_loop"], rows)
    print(f"\nfixed cost of one run (/bin/true, median of 15): raw {true_raw * 1000:.1f} ms, "
          f"sandboxed {true_sb * 1000:.1f} ms")
    print(f"layers: {' '.join(layers)}")
    verdict = "OK" if statistics.median(ratios) <= 1.05 else "OVER GOAL"
    print(f"median wall ratio {statistics.median(ratios):.3f}x (goal <= 1.05x): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
