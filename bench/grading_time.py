"""Grading time of homework 1's starter, a single-card sample and the reference, side by side.

Wrong scripts should cost the grading host less than right ones: the unmodified
starter and a script without a DistributedSampler are graded in at most half the reference's
time. Gradings are interleaved (starter, sample, reference, starter, ...) so that a change in the
host's load hits all three alike; the table gives each one's median wall time and its ratio to
the reference's. With ``--pairs K`` it first runs K interleaved 1-process / N-process pairs of the
reference and prints each pair's speedup (the data the speed threshold is chosen from).

    .venv/bin/python bench/grading_time.py [--rounds 2] [--pairs 0]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursework import assignments  # noqa: E402
from graders import cli  # noqa: E402
from graders.ddp_speedup import calibration  # noqa: E402

SCRIPTS = {"starter": "starter/train.py", "no_sampler": "samples/bug_no_distributed_sampler",
           "reference": "solution/train.py"}


def reference_pairs(cfg: dict, k: int) -> list[dict[str, float]]:
    """``k`` interleaved pairs of the reference, none discarded for load (the load is printed instead)."""
    ccfg = {**calibration.settings(cfg), "max_pairs": k, "pairs": k + 1, "max_extra_load": 1e9}
    pairs, _ = calibration._measure(cfg, "cpu", ccfg)
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=0)
    args = parser.parse_args()
    a = assignments.load("ddp_speedup")
    cfg = {**a.raw, "_path": str(a.path), "_id": a.id}
    if args.pairs:
        t = time.monotonic()
        pairs = reference_pairs(cfg, args.pairs)
        print(json.dumps({"reference_pairs": pairs, "load": os.getloadavg()[0],
                          "took_s": round(time.monotonic() - t)}), flush=True)
    ref = calibration.reference(cfg, "cpu")
    print(f"calibration: {ref and ref.get('speedup')}", flush=True)
    walls: dict[str, list[float]] = {k: [] for k in SCRIPTS}
    for _ in range(args.rounds):
        for name, rel in SCRIPTS.items():
            t = time.monotonic()
            report = cli.grade("ddp_speedup", str(a.path / rel), "cpu")
            walls[name].append(time.monotonic() - t)
            verdicts = {c.id: f"{c.status.value}:{c.points:g}" for c in report.checks}
            print(json.dumps({"script": name, "wall_s": round(walls[name][-1], 1), "score": report.score,
                              "load": round(os.getloadavg()[0], 1), "verdicts": verdicts}), flush=True)
    ref_wall = statistics.median(walls["reference"])
    print(f"{'script':12} {'median wall (s)':>16} {'/ reference':>12}")
    for name, w in walls.items():
        print(f"{name:12} {statistics.median(w):16.1f} {statistics.median(w) / ref_wall:12.2f}")


if __name__ == "__main__":
    main()
