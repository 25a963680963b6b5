"""fsdp_fit speed: grading the reference solution (CPU mode, real sizes) and the FSDP observer's overhead.

    .venv/bin/python -m bench.fsdp_grader [--repeats 3] [--overhead-pairs 3]

Prints a table: the grade's wall time (median of ``repeats``; target <= 90 s on 2 cores)
and, for the same 2-rank run with and without ``DISTGRADE_FSDP=1``, the training-loop
time (first to last optimizer step, from the generic harness's step records) and the
run's wall time; the ratio's target is <= 1.25x. Runs are interleaved so load from other
jobs on the host hits both sides alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from coursework import assignments, settings
from graders import cli, torchrun
from graders.fsdp_fit import grader as fsdp_fit

SOLUTION = settings.assignments_dir() / "fsdp_fit" / "solution" / "train_fsdp.py"


def grade_once() -> tuple[float, float]:
    """Wall seconds of one CPU grade of the reference solution, and its score."""
    started = time.monotonic()
    report = cli.grade("fsdp_fit", str(SOLUTION), "cpu")
    return time.monotonic() - started, report.score


def loop_seconds(run) -> float | None:
    """First to last optimizer step on rank 0 (the generic harness's ``steps`` records)."""
    stream = run.ranks.get(0)
    t = [x for rec in stream.of("steps") for x in rec["t"]] if stream else []
    return t[-1] - t[0] if len(t) >= 2 else None


def overhead_pair(cfg: dict, root: Path, i: int) -> dict[str, dict[str, float | None]]:
    """The same 2-rank run with the FSDP observer off, then on."""
    job = root / f"p{i}"
    job.mkdir(mode=0o711)
    script = fsdp_fit._stage(SOLUTION, job, SOLUTION.parent.parent / "starter" / "model.py")
    limits = torchrun.make_limits(cfg["limits"]["cpu"])
    out = {}
    for tag, env in (("bare", {}), ("observed", {"DISTGRADE_FSDP": "1"})):
        run = torchrun.run(script, cfg["nproc"], root=root / f"p{i}" / tag, data_dir=script.parent, epochs=0,
                           limits=limits, script_args=["--model-size", cfg["sizes"]["cpu"],
                                                       "--steps", str(cfg["steps"]["cpu"])], extra_env=env)
        out[tag] = {"loop_s": loop_seconds(run), "wall_s": run.result.wall_s, "finished": run.all_finished}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overhead-pairs", type=int, default=3)
    args = parser.parse_args(argv)
    cfg = assignments.load("fsdp_fit").raw
    grades = []
    for _ in range(args.repeats):
        grades.append(grade_once())
        print(f"grade: {grades[-1][0]:.1f} s, score {grades[-1][1]:g}", flush=True)
    with tempfile.TemporaryDirectory(prefix="distgrade-bench-", dir=os.environ.get("DISTGRADE_JOBS_DIR")) as tmp:
        root = Path(tmp)
        os.chmod(root, 0o711)
        pairs = [overhead_pair(cfg, root, i) for i in range(args.overhead_pairs)]

    def med(tag, key):
        vals = [p[tag][key] for p in pairs if p[tag][key] is not None]
        return statistics.median(vals) if vals else float("nan")
    walls = [g[0] for g in grades]
    rows = [("grade reference solution, cpu (median s)", f"{statistics.median(walls):.1f}", "<= 90",
             f"runs {', '.join(f'{w:.1f}' for w in walls)}; score {grades[0][1]:g}"),
            ("training loop, observer off (median s)", f"{med('bare', 'loop_s'):.2f}", "", ""),
            ("training loop, observer on (median s)", f"{med('observed', 'loop_s'):.2f}", "", ""),
            ("loop overhead (on / off)", f"{med('observed', 'loop_s') / med('bare', 'loop_s'):.2f}x", "<= 1.25x", ""),
            ("run wall overhead (on / off)", f"{med('observed', 'wall_s') / med('bare', 'wall_s'):.2f}x", "",
             f"off {med('bare', 'wall_s'):.1f} s, on {med('observed', 'wall_s'):.1f} s")]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':{width}}  {'value':>8}  {'target':>8}  notes")
    for name, value, target, notes in rows:
        print(f"{name:{width}}  {value:>8}  {target:>8}  {notes}")
    print(json.dumps({"load_avg": os.getloadavg(), "cpus": os.cpu_count(), "pairs": pairs}))


if __name__ == "__main__":
    main()
