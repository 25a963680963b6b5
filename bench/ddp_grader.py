"""Benchmark of the ddp_speedup grader in CPU mode on this host.

Prints one table: wall time of grading the reference solution (median of K),
the same torchrun commands run bare (no harness, no sandbox), their ratio, and
the normalised speedup of each grading (its raw speedup over the calibrated reference's,
uncapped) with its coefficient of variation and band. Calibration runs first, as the worker
does at start-up, and is not part of a grading's wall time.

    .venv/bin/python bench/ddp_grader.py [--gradings 5]

``DISTGRADE_BENCH_GRADINGS`` sets the default number of gradings (5), for hosts too
loaded to run all of them in reasonable time; the CV needs at least 2.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursework import assignments
from graders import cifar, cli, torchrun  # noqa: E402
from graders.ddp_speedup import calibration  # noqa: E402


# PyTorch has SyncBatchNorm only for accelerators: without the harness's CPU version the
# reference solution dies in DDP() within seconds, and the bare time measured nothing.
SHIM = "from distgrade_harness import syncbn\nsyncbn.install()\n"


def bare_run(solution: Path, data: Path, epochs: int) -> float:
    """The grader's two torchrun commands without sandbox or observation hooks.

    Only the CPU SyncBatchNorm shim is loaded, since the script cannot run on CPU without it;
    a failed run raises rather than being timed.
    """
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as site:
        Path(site, "sitecustomize.py").write_text(SHIM)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
               "PYTHONPATH": f"{site}:{torchrun.HARNESS_DIR}"}
        for n in (1, 2):
            with tempfile.TemporaryDirectory() as work:
                proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                       f"--nproc_per_node={n}", str(solution), "--data-dir", str(data),
                                       "--epochs", str(epochs)], cwd=work, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"bare run with {n} process(es) failed:\n{proc.stderr[-2000:]}")
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gradings", type=int, default=int(os.environ.get("DISTGRADE_BENCH_GRADINGS", "5")))
    args = parser.parse_args()
    a = assignments.load("ddp_speedup")
    cfg = {**a.raw, "_path": str(a.path), "_id": a.id}
    solution = a.path / "solution" / "train.py"
    t = time.monotonic()
    ref = calibration.reference(cfg, "cpu")  # what the worker does at start-up; not part of a grading's wall
    state = calibration.load_state(a.id, "cpu") or {}
    if ref is None:
        sys.exit(f"calibration rejected: {state.get('rejected', [])[-1:]}")
    print(f"calibration: reference speedup {ref['speedup']:.3f}, 1 process {ref['t1']:.0f}/s, "
          f"{cfg['nproc']} processes {ref['tn']:.0f}/s (pairs {[p['speedup'] for p in ref['pairs']]}), "
          f"{time.monotonic() - t:.0f} s")
    data = Path(tempfile.mkdtemp())
    cifar.write_synthetic(data, **cfg["synthetic"])
    walls, bares, norms, bands = [], [], [], []
    for _ in range(args.gradings):  # interleaved: graded, bare, graded, bare ...
        t = time.monotonic()
        report = cli.grade("ddp_speedup", str(solution), "cpu")
        walls.append(time.monotonic() - t)
        ev = report.check("speedup").evidence
        # the reference against itself, uncapped (the report caps the credited value at 1)
        norms.append(ev["raw"] / ref["speedup"] if "raw" in ev else float("nan"))
        bands.append(f"{report.check('speedup').status.value}:{ev.get('band', ev.get('key'))}")
        bares.append(bare_run(solution, data, int(cfg["epochs"]["cpu"])))
        print(f"grading {len(walls)}: {walls[-1]:.1f} s, bare {bares[-1]:.1f} s, normalised {norms[-1]:.3f} "
              f"({bands[-1]})", flush=True)  # progress on a slow host, where the table comes late
    shutil.rmtree(data, ignore_errors=True)
    mean = statistics.mean(norms)
    cv = statistics.pstdev(norms) / mean if mean else float("nan")
    rows = [("grading wall, median (s)", f"{statistics.median(walls):.1f}", "<= 60"),
            ("bare torchrun wall, median (s)", f"{statistics.median(bares):.1f}", ""),
            ("grader overhead (graded / bare)", f"{statistics.median(walls) / statistics.median(bares):.3f}", "<= 1.15"),
            ("normalised speedups", " ".join(f"{x:.3f}" for x in norms), ""),
            ("normalised speedup CV", f"{cv:.1%}", "<= 10%"),
            ("normalised within 0.8-1.25", f"{sum(0.8 <= x <= 1.25 for x in norms)}/{len(norms)}", "all"),
            ("verdict bands", " ".join(bands), "same 5/5"),
            ("reference speedup (raw)", f"{ref['speedup']:.3f}", "")]
    width = max(len(r[0]) for r in rows)
    print(f"{'metric':{width}}  {'value':>36}  target")
    for name, value, target in rows:
        print(f"{name:{width}}  {value:>36}  {target}")


if __name__ == "__main__":
    main()
