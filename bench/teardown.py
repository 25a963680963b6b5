"""CPU a torchrun launcher spends on its own start and exit, with and without the harness's settle, side by side.

Every graded run starts ``python -m torch.distributed.run`` with the harness on ``PYTHONPATH``; in the launcher the
harness registers ``_settle_before_teardown`` (collect, then ``gc.freeze``), so CPython's teardown frees torch's
modules without walking their objects collection after collection. Each round runs the launcher twice, in
alternating order, as ``torchrun --help`` (it imports torch, parses its arguments and exits: no worker, whose own
harness would need the grader's channel): plain, and in the harness's launcher role (``DISTGRADE_CHANNEL`` set, no
``RANK``). CPU is the child's user + system time from ``getrusage``, so another job's load on the host changes it
little. Reported: median CPU per launch of each side, and the median of per-round ratios (goal <= 0.85x).

Run: ``.venv/bin/python -m bench.teardown`` (``BENCH_ROUNDS``, default 5).
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import print_table

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
HARNESS = Path(__file__).resolve().parents[1] / "graders" / "harness"


def launch_cpu(channel: str | None) -> float:
    """CPU seconds of one ``torchrun --help``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DISTGRADE_CHANNEL", "RANK")}
    env["OMP_NUM_THREADS"] = "1"
    if channel:
        env.update(PYTHONPATH=str(HARNESS), DISTGRADE_CHANNEL=channel)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--help"], env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        plain, settled = [], []
        for i in range(ROUNDS):
            for side in ((False, True) if i % 2 == 0 else (True, False)):
                (settled if side else plain).append(launch_cpu(tmp if side else None))
    ratios = [s / p for p, s in zip(plain, settled)]
    print_table("torchrun's own CPU", ["side", "median CPU per launch (s)"],
                [["plain launcher", f"{statistics.median(plain):.2f}"],
                 ["with the harness's settle", f"{statistics.median(settled):.2f}"]])
    ratio = statistics.median(ratios)
    print(f"median CPU ratio {ratio:.2f}x (goal <= 0.85x): {'OK' if ratio <= 0.85 else 'OVER GOAL'}")
    return 0 if ratio <= 0.85 else 1


if __name__ == "__main__":
    sys.exit(main())
