"""On a real GPU: the simulated 15 GiB T4 turns an unsharded 1b run into a CUDA OOM that the
grader reports as "does not fit" with its numbers, while the small size fits.

One rank, no sharding, under the sandbox and harness exactly as the grader runs them.
Skipped without CUDA (this repository's CI has none).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from graders import fsdp_fit, torchrun  # noqa: E402
from graders.checks import fsdp  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ROOT = Path(__file__).resolve().parents[2]
CFG = json.loads((ROOT / "assignments/fsdp_fit/assignment.json").read_text(encoding="utf-8"))
CARD = 15 * 2 ** 30

UNSHARDED = '''
import argparse, torch, torch.distributed as dist
from model import build_model, make_dataset, SIZES
p = argparse.ArgumentParser(); p.add_argument("--model-size"); p.add_argument("--steps", type=int)
a = p.parse_args()
dist.init_process_group("nccl")
torch.cuda.set_device(0)
model = build_model(a.model_size).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
data = make_dataset(a.model_size)
for i in range(a.steps):
    x, y = (t[None].cuda() for t in data[i])
    model(x, y).backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
'''


def _run_one_rank(size: str, tmp_path: Path):
    job = tmp_path / size
    code = job / "code"
    code.mkdir(parents=True)
    os.chmod(tmp_path, 0o711)
    os.chmod(job, 0o711)
    (code / "train_fsdp.py").write_text(UNSHARDED)
    shutil.copyfile(ROOT / "assignments/fsdp_fit/starter/model.py", code / "model.py")
    os.chmod(code, 0o755)
    limits = torchrun.make_limits(CFG["limits"]["gpu"])
    return torchrun.run(code / "train_fsdp.py", 1, root=job / "n1", data_dir=code, epochs=0, limits=limits,
                        mode="gpu", gpus=[0], script_args=["--model-size", size, "--steps", "2"],
                        extra_env={"DISTGRADE_FSDP": "1", "DISTGRADE_CAPACITY_BYTES": str(CARD)})


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
