"""One-shot check of every GPU path that one GPU can exercise, with one table at the end.

Run ``python -m bench.gpu_check`` on a host with a GPU (after ``./distgrade install``; it
installs nothing and needs no network). Each path runs on its own, bounded in time, so one
failure never hides the others; the table says pass / fail / skip, seconds and numbers, and
``--out DIR`` keeps every path's details (tracebacks, log tails, reports) as JSON.

Without a GPU it runs the parts that need none (the sandbox probe, the slot logic on a
simulated one-GPU host) and says, for every GPU path, what it would run: that is how the
test suite runs it (``tests/ops/test_gpu_check.py``).

What one GPU cannot show is printed under the table (``ONE_GPU_CANNOT``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench import gpu_paths
from bench.common import print_table
from bench.gpu_paths import Env, Row
from graders import workspace

ROOT = Path(__file__).resolve().parents[1]
ONE_GPU_CANNOT = (
    "2-rank NCCL: DDP's all-reduce, FSDP full_shard over two cards and the homework-1 speedup need two GPUs "
    "(one GPU cannot host two NCCL ranks); their gloo twins run in CI",
    "CUDA_VISIBLE_DEVICES renumbering from a host index other than 0 (this host has GPU 0 only)",
    "GPU slot choice by NVLink / PCIe topology (nvidia-smi topo -m needs two GPUs)",
)


@dataclass
class Path_:
    name: str
    run: Callable[[Env], Row]
    needs_gpu: bool
    would: str  # what it runs on a GPU host, said in the CPU-only table


def cuda_available() -> bool:
    """A CUDA device usable by torch (never raises)."""
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:  # a broken CUDA install is "no GPU" here; the host row says why
        return False


PATHS = [
    Path_("host", gpu_paths.host, True, "nvidia-smi, torch's CUDA device, NCCL version"),
    Path_("sandbox", gpu_paths.sandbox_probe, False, "the full sandbox's probe (bwrap, uid, cgroup)"),
    Path_("sandbox.gpu", gpu_paths.sandbox_gpu, True,
          "a CUDA matmul inside the sandbox with only the job's device nodes and CUDA_VISIBLE_DEVICES=0"),
    Path_("slots", gpu_paths.slots, False, "GPU slot locks on the GPUs nvidia-smi lists (simulated without one)"),
    Path_("hw1.nccl1", gpu_paths.hw1_single, True,
          "homework 1's reference graded in GPU mode: 1-process NCCL run, CUDA-synchronised step times, "
          "overhead vs bare torchrun"),
    Path_("hw3.memory", gpu_paths.hw3_memory, True,
          "homework 3: unsharded 1b on the simulated 15 GiB T4 -> CUDA OOM graded 'does not fit'; small fits"),
    Path_("worker", gpu_paths.worker, True,
          "a real RQ worker (WORKER_GPUS=1): CPU pre-flight, then the GPU run of homework 3 on GPU 0"),
    Path_("flight_recorder", gpu_paths.flight_recorder, True,
          "a 1-rank NCCL all-reduce held behind a sleeping kernel: watchdog timeout and flight-recorder dump"),
]


def run_path(p: Path_, env: Env, deadline: float) -> Row:
    """Run one path, turning any exception into a failed row with its traceback."""
    if p.needs_gpu and not env.gpu:
        return Row(p.name, "skip", note="no GPU here; on a GPU host: " + p.would)
    if time.monotonic() > deadline:
        return Row(p.name, "skip", note="the check's time budget was spent before this path")
    started = time.monotonic()
    try:
        row = p.run(env)
    except Exception:
        row = Row(p.name, "fail", note="raised (see details)", details={"traceback": traceback.format_exc()[-6000:]})
    row.path = p.name
    row.seconds = round(time.monotonic() - started, 1)
    return row


def numbers_text(numbers: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in numbers.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check")
    parser.add_argument("--out", help="folder for gpu_check.json (every path's details)")
    parser.add_argument("--only", help="comma-separated path names")
    parser.add_argument("--budget-s", type=float, default=480, help="paths not started by then are skipped")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    deadline = time.monotonic() + args.budget_s
    rows: list[Row] = []
    # One job folder (and sandbox uid) for every path, as a grading has: on a host whose workers are
    # busy, a run outside a job could take another uid than its token files were made for.
    with workspace.job_dir("gpucheck") as tmp:
        env = Env(tmp=tmp, gpu=cuda_available())
        for p in PATHS:
            if only is None or p.name in only:
                row = run_path(p, env, deadline)
                rows.append(row)
                print(f"[gpu_check] {row.path}: {row.status} in {row.seconds}s {row.note}", file=sys.stderr, flush=True)
                if row.path == "sandbox" and row.status == "fail":
                    # Keep exercising the GPU code: the sandbox row already failed the check.
                    os.environ["DISTGRADE_SANDBOX"] = "none"
                    env.notes.append("the full sandbox failed its probe: the paths after it ran with DISTGRADE_SANDBOX=none")
    title = "GPU check (" + ("on a GPU" if env.gpu else "CPU-only: the GPU paths say what they would run") + ")"
    print_table(title, ["path", "result", "seconds", "numbers / note"],
                [(r.path, r.status, r.seconds, (numbers_text(r.numbers) + ("  " if r.numbers and r.note else "") + r.note))
                 for r in rows])
    print("\nWhat one GPU cannot show:")
    for line in ONE_GPU_CANNOT:
        print(f"  - {line}")
    for line in env.notes:
        print(f"  ! {line}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_check.json").write_text(json.dumps(
            {"gpu": env.gpu, "notes": env.notes, "rows": [r.__dict__ for r in rows]}, indent=1, default=str))
    return 1 if any(r.status == "fail" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
