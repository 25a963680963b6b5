"""Homework 1's synthetic data: a secret seed per job in the service, a pinned one only for the sample runner."""
from __future__ import annotations

import subprocess
import sys

import pytest

from graders.ddp_speedup import job as ddp_job
from server.grading import worker


def test_each_job_draws_its_own_seed_unless_the_sample_runner_pins_one(monkeypatch) -> None:
    monkeypatch.delenv(ddp_job.PINNED_SEED_ENV, raising=False)
    assert len({ddp_job.synthetic_seed() for _ in range(20)}) == 20
    monkeypatch.setenv(ddp_job.PINNED_SEED_ENV, "7301")
    assert {ddp_job.synthetic_seed() for _ in range(3)} == {7301}
    monkeypatch.setenv(ddp_job.PINNED_SEED_ENV, "not a number")  # ignored, not a crash and not a fixed seed
    assert len({ddp_job.synthetic_seed() for _ in range(5)}) == 5


def test_a_worker_refuses_to_start_with_a_pinned_seed(monkeypatch) -> None:
    monkeypatch.setenv(ddp_job.PINNED_SEED_ENV, "7301")
    with pytest.raises(SystemExit, match=ddp_job.PINNED_SEED_ENV):
        worker.refuse_pinned_seed()
    monkeypatch.delenv(ddp_job.PINNED_SEED_ENV)
    worker.refuse_pinned_seed()  # unset: starts


def test_the_worker_process_exits_with_the_reason(tmp_path) -> None:
    env = {"PATH": "/usr/bin:/bin", ddp_job.PINNED_SEED_ENV: "1", "DISTGRADE_VAR_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", "from server.grading.worker import refuse_pinned_seed; "
                          "refuse_pinned_seed()"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "Unset it before starting a worker" in out.stderr
