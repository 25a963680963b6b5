"""The shared memory calculator against the chapter's 112 GB and the ZeRO paper's table."""
from __future__ import annotations

import pytest

from coursework.memory_calc import (GB, FsdpStrategy, Optimizer, Precision, TrainingSetup, bytes_per_param,
                                 estimate, full_training_bytes, zero_stage_bytes)


def test_chapter_7b_needs_112_gb() -> None:
    assert full_training_bytes(7e9) == pytest.approx(112 * GB)
    assert estimate(TrainingSetup(params=7e9)).total_gb == pytest.approx(112)


@pytest.mark.parametrize("stage,expected_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_7_5b_on_64_cards(stage: int, expected_gb: float) -> None:
    est = estimate(TrainingSetup(params=7.5e9, cards=64, stage=stage))
    assert est.total_gb == pytest.approx(expected_gb, abs=0.06)
    assert zero_stage_bytes(7.5e9, 64, stage) == pytest.approx(est.total_bytes)


@pytest.mark.parametrize("strategy,stage", [(FsdpStrategy.NO_SHARD, 0), (FsdpStrategy.SHARD_GRAD_OP, 2),
                                            (FsdpStrategy.FULL_SHARD, 3)])
def test_fsdp_strategies_match_zero_stages(strategy: FsdpStrategy, stage: int) -> None:
    a = estimate(TrainingSetup(params=1e9, cards=8, fsdp=strategy))
    b = estimate(TrainingSetup(params=1e9, cards=8, stage=stage))
    assert a.total_bytes == b.total_bytes


def test_hybrid_shards_within_a_node_only() -> None:
    hybrid = estimate(TrainingSetup(params=1e9, cards=16, fsdp=FsdpStrategy.HYBRID_SHARD, cards_per_node=8))
    assert hybrid.total_bytes == pytest.approx(16e9 / 8)


@pytest.mark.parametrize("precision,optimizer,total", [
    (Precision.BF16_MIXED, Optimizer.ADAMW, 16), (Precision.FP16_MIXED, Optimizer.ADAM, 16),
    (Precision.FP32, Optimizer.ADAM, 16), (Precision.FP32, Optimizer.SGD, 8),
    (Precision.FP32, Optimizer.SGD_MOMENTUM, 12), (Precision.BF16_MIXED, Optimizer.SGD_MOMENTUM, 12),
    (Precision.BF16_MIXED, Optimizer.SGD, 8)])
def test_bytes_per_param(precision: Precision, optimizer: Optimizer, total: int) -> None:
    assert bytes_per_param(precision, optimizer).total == total


def test_offload_moves_states_to_cpu() -> None:
    est = estimate(TrainingSetup(params=13e9, cards=2, stage=3, offload_optimizer=True, offload_params=True))
    assert est.optimizer_bytes == 0 and est.params_bytes == 0
    assert est.grads_bytes == pytest.approx(13e9)
    assert est.cpu_bytes == pytest.approx((12 + 2) * 13e9 / 2)
    assert "CPU" in est.formula["en"] and "CPU" in est.formula["zh"]


def test_param_offload_requires_stage_3() -> None:
    with pytest.raises(ValueError):
        TrainingSetup(params=1e9, stage=2, offload_params=True)


def test_formula_text_and_dict() -> None:
    d = estimate(TrainingSetup(params=7.5e9, cards=64, stage=1)).to_dict()
    assert d["formula"]["expr"] == "2Ψ + 2Ψ + 12Ψ/N"
    assert d["setup"]["precision"] == "bf16" and d["stage"] == 1
