"""On a real GPU: the simulated 15 GiB T4 turns an unsharded 1b run into a CUDA OOM that the
grader reports as "does not fit" with its numbers, while the small size fits.

One rank, no sharding, under the sandbox and harness exactly as the grader runs them.
Skipped without CUDA (this repository's CI has none).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from bench.gpu_paths import run_unsharded  # noqa: E402
from graders.fsdp_fit import grader as fsdp_fit  # noqa: E402
from graders.fsdp_fit import checks as fsdp  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ROOT = Path(__file__).resolve().parents[2]
CFG = json.loads((ROOT / "assignments/fsdp_fit/assignment.json").read_text(encoding="utf-8"))
CARD = 15 * 2 ** 30


def _run_one_rank(size: str, tmp_path: Path):
    return run_unsharded(size, tmp_path, CARD)  # the same run bench.gpu_check makes


def test_unsharded_1b_does_not_fit_the_simulated_t4(tmp_path):
    run = _run_one_rank("1b", tmp_path)
    fit = fsdp.check_fit(run, CARD, "T4")
    assert fit.key == "oom", (fit, run.logs)
    message = fsdp_fit.result_of(CFG["checks"]["memory.fit"], "memory.fit", fit).message["en"]
    assert "does not fit" in message.lower() and "16.1 GB" in message
    crash = fsdp.check_run(run, "T4")
    assert crash.key == "oom" and crash.params["tried"] != "?"
    assert float(crash.evidence["oom"]["allocated"]) > 0.8 * CARD


def test_unsharded_small_fits(tmp_path):
    run = _run_one_rank("small", tmp_path)
    assert run.all_finished, run.logs
    fit = fsdp.check_fit(run, CARD, "T4")
    assert fit.key == "fits" and fit.evidence["ranks"][0]["peak"] < CARD
