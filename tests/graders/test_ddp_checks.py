"""Pure decisions of the ddp_speedup grader: GPU plan, speedup bands, stuck collective, CIFAR layout."""
from __future__ import annotations

import pickle

import pytest

from graders import cifar
from graders.checks import ddp
from graders.ddp_speedup import gpu_plan
from graders.report import CheckStatus


@pytest.mark.parametrize("mode, available, expected", [
    ("cpu", 0, (True, True, None)),
    ("gpu", 0, (False, False, "this host has no GPU; 2 are needed")),
    ("gpu", 1, (True, False, "this host has 1 GPU(s); 2 are needed")),
    ("gpu", 2, (True, True, None)),
])
def test_gpu_plan(mode, available, expected):
    assert gpu_plan(mode, 2, available) == expected


@pytest.mark.parametrize("normalised, status, band", [
    (1.1, CheckStatus.PASS, "pass"), (0.8, CheckStatus.PASS, "pass"),
    (0.65, CheckStatus.WARN, "partial"), (0.3, CheckStatus.FAIL, "fail"),
])
def test_speedup_band(normalised, status, band):
    got = ddp.speedup_band(normalised, {"pass": 0.8, "fail_below": 0.5})
    assert (got[0], got[2]) == (status, band)


def test_stuck_in_names_the_collective():
    dump = ('Current thread 0x00007f (most recent call first):\n'
            '  File "/x/torch/distributed/c10d_logger.py", line 81 in wrapper\n'
            '  File "/x/torch/distributed/distributed_c10d.py", line 4800 in barrier\n'
            '  File "/job/code/train.py", line 70 in main\n')
    assert ddp._stuck_in(dump) == "barrier"


def test_synthetic_cifar_reads_like_the_real_files(tmp_path):
    folder = cifar.write_synthetic(tmp_path, per_batch=20, test_size=10)
    with open(folder / "data_batch_1", "rb") as f:
        as_bytes = pickle.load(f, encoding="bytes")
    with open(folder / "data_batch_1", "rb") as f:
        as_latin1 = pickle.load(f, encoding="latin1")
    assert as_bytes[b"data"].shape == (20, 3072) and as_bytes[b"data"].dtype.name == "uint8"
    assert (as_latin1["data"] == as_bytes[b"data"]).all() and as_latin1["labels"] == as_bytes[b"labels"]
    assert b"U\x04data" in (folder / "data_batch_1").read_bytes()  # keys are py2 str (SHORT_BINSTRING)
    assert cifar.train_size(tmp_path) == 100
