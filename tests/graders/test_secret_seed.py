"""Homework 1's synthetic data is drawn per job from a secret.

The class patterns were a function of a seed in the repository, so weights fitted offline to that
seed's classes scored well on the grader's held-out data of every job although the script learned
nothing from the data it was given. Each job now draws its own seed: the data on disk is all the
script gets, the seed is not written beside it, and the held-out set follows the same seed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from coursework import assignments
from graders import cifar
from graders.ddp_speedup import job as ddp_job
from graders.evidence import model
from tests.fixtures.starter_model import fit

ROOT = Path(__file__).resolve().parents[2]
FACTORY = ROOT / "assignments/ddp_speedup/starter/train.py"


def _cfg() -> dict:
    a = assignments.load("ddp_speedup")
    return {**a.raw, "synthetic": {**a.raw["synthetic"], "per_batch": 64, "test_size": 32}}


def test_each_job_draws_its_own_classes_and_does_not_write_the_seed(tmp_path):
    got = []
    for name in ("a", "b"):
        job = tmp_path / name
        job.mkdir()
        root, synthetic = ddp_job.data_dir(job, "cpu", _cfg())
        folder = root / cifar.FOLDER
        got.append((folder / "data_batch_1").read_bytes())
        assert synthetic and synthetic["seed"] != 0
        assert str(synthetic["seed"]) not in (folder / cifar.STAMP).read_text()
    assert got[0] != got[1]


def test_weights_fitted_to_the_public_seed_score_at_chance_on_a_jobs_held_out_data(tmp_path):
    import torch
    public = np.load(model.write_held_out(tmp_path / "public.npz", {"seed": 0}, 300))
    torch.save(fit(public["x"], public["y"]).state_dict(), tmp_path / "offline.pt")
    job = tmp_path / "job"
    job.mkdir()
    _, synthetic = ddp_job.data_dir(job, "cpu", _cfg())
    scores = {}
    for name, params in (("public", {"seed": 0}), ("job", synthetic)):
        data = model.write_held_out(tmp_path / f"held-{name}.npz", params, 300)
        out = subprocess.run([sys.executable, str(model.SCRIPT), str(FACTORY), "make_model", str(data),
                              str(tmp_path / "offline.pt")], capture_output=True, text=True, timeout=300, check=True)
        scores[name] = json.loads(out.stdout.strip().splitlines()[-1])[str(tmp_path / "offline.pt")]["accuracy"]
    assert scores["public"] >= 0.4, scores  # the attack worked while the seed was public
    assert scores["job"] < 0.3, scores  # the floor: it fails on the job's own classes
