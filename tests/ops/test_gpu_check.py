"""``python -m bench.gpu_check`` in its CPU-only mode: what CI can run of the one-shot GPU check.

On a host without a GPU it must still run the parts that need none (the full sandbox's probe,
the slot locks on a simulated one-GPU host), say for every GPU path what it would run there,
name what one GPU cannot show, and exit 0. On a GPU host it runs everything (see the README).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import gpu_check

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(gpu_check.cuda_available(), reason="a GPU host runs the whole check, not its CPU-only mode")
def test_cpu_only_mode_runs_what_it_can_and_says_the_rest(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_check", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["path"]: r for r in json.loads((tmp_path / "gpu_check.json").read_text())["rows"]}
    assert set(rows) == {p.name for p in gpu_check.PATHS}
    assert rows["slots"]["status"] == "pass" and rows["slots"]["numbers"]["simulated"] is True
    assert rows["sandbox"]["status"] in ("pass", "fail")  # a non-root laptop lacks layers; CI (root) has them
    for p in gpu_check.PATHS:
        if p.needs_gpu:
            assert rows[p.name]["status"] == "skip" and p.would in rows[p.name]["note"]
            assert p.name in proc.stdout
    assert "What one GPU cannot show" in proc.stdout and "2-rank NCCL" in proc.stdout


def test_a_path_that_raises_is_a_failed_row_not_a_crash(tmp_path):
    def broken(env):
        raise RuntimeError("boom")

    row = gpu_check.run_path(gpu_check.Path_("broken", broken, False, "nothing"),
                             gpu_check.Env(tmp=tmp_path, gpu=False), deadline=float("inf"))
    assert row.status == "fail" and "boom" in row.details["traceback"]
