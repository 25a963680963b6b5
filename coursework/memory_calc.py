"""Model-state memory per card for data-parallel training, ZeRO stages and FSDP strategies.

One calculator serves the quiz generators, the FSDP homework grader and the web page, so the
arithmetic (and the formula text students see) is written once. Pure functions and
dataclasses only: no Flask, no torch, no I/O.

The accounting follows the ZeRO paper: with Ψ parameters, mixed-precision training keeps
2Ψ bytes of half-precision weights, 2Ψ bytes of half-precision gradients and KΨ bytes of
optimizer state (K = 12 for Adam: fp32 master weights, momentum and variance). Stage 1
shards the K term over the data-parallel cards, stage 2 also the gradients, stage 3 also the
weights (FSDP ``FULL_SHARD``). Activations, buffers and fragmentation are not model states
and are left out on purpose; the chapter's "7B needs 112 GB" is this same count (16 B/param).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

GB = 1e9
GIB = 2 ** 30


class Precision(str, Enum):
    FP32 = "fp32"
    BF16_MIXED = "bf16"  # bf16 weights/grads + fp32 master copy
    FP16_MIXED = "fp16"  # same byte count as bf16 mixed (loss scaling costs no model state)


class Optimizer(str, Enum):
    ADAM = "adam"
    ADAMW = "adamw"
    SGD_MOMENTUM = "sgd_momentum"
    SGD = "sgd"


class FsdpStrategy(str, Enum):
    NO_SHARD = "NO_SHARD"  # = DDP = ZeRO-0
    SHARD_GRAD_OP = "SHARD_GRAD_OP"  # = ZeRO-2
    FULL_SHARD = "FULL_SHARD"  # = ZeRO-3
    HYBRID_SHARD = "HYBRID_SHARD"  # ZeRO-3 inside a node, replicated across nodes


FSDP_TO_STAGE = {FsdpStrategy.NO_SHARD: 0, FsdpStrategy.SHARD_GRAD_OP: 2,
                 FsdpStrategy.FULL_SHARD: 3, FsdpStrategy.HYBRID_SHARD: 3}


@dataclass(frozen=True)
class TrainingSetup:
    """What determines model-state memory. ``stage`` wins unless ``fsdp`` is given."""

    params: float
    cards: int = 1
    precision: Precision = Precision.BF16_MIXED
    optimizer: Optimizer = Optimizer.ADAM
    stage: int = 0
    fsdp: FsdpStrategy | None = None
    cards_per_node: int | None = None  # HYBRID_SHARD shards over one node only
    offload_optimizer: bool = False
    offload_params: bool = False

    def __post_init__(self) -> None:
        if not self.params > 0:
            raise ValueError("params must be positive")
        if self.cards < 1:
            raise ValueError("cards must be >= 1")
        if self.stage not in (0, 1, 2, 3):
            raise ValueError("ZeRO stage must be 0, 1, 2 or 3")
        if self.offload_params and self.effective_stage < 3:
            raise ValueError("parameter offload needs ZeRO-3 / FULL_SHARD")

    @property
    def effective_stage(self) -> int:
        """The ZeRO stage this setup amounts to."""
        return FSDP_TO_STAGE[FsdpStrategy(self.fsdp)] if self.fsdp else self.stage

    @property
    def shard_group(self) -> int:
        """How many cards one copy of the sharded states is spread over."""
        if self.fsdp == FsdpStrategy.HYBRID_SHARD and self.cards_per_node:
            return min(self.cards, self.cards_per_node)
        return self.cards


@dataclass(frozen=True)
class BytesPerParam:
    """Bytes per parameter for each model state before sharding (the ZeRO paper's 2/2/K)."""

    params: int
    grads: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer


@dataclass
class MemoryEstimate:
    """Model-state bytes on one card (and in CPU memory per card when offloaded)."""

    setup: TrainingSetup
    per_param: BytesPerParam
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    cpu_bytes: float
    formula: dict[str, str] = field(default_factory=dict)

    @property
    def total_bytes(self) -> float:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def total_gb(self) -> float:
        return self.total_bytes / GB

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the web page and grade reports."""
        setup = asdict(self.setup)
        setup = {k: (v.value if isinstance(v, Enum) else v) for k, v in setup.items()}
        return {"setup": setup, "stage": self.setup.effective_stage, "per_param": asdict(self.per_param),
                "params_bytes": self.params_bytes, "grads_bytes": self.grads_bytes,
                "optimizer_bytes": self.optimizer_bytes, "total_bytes": self.total_bytes,
                "cpu_bytes": self.cpu_bytes, "total_gb": round(self.total_gb, 3), "formula": self.formula}


def bytes_per_param(precision: Precision | str, optimizer: Optimizer | str) -> BytesPerParam:
    """Unsharded bytes per parameter for weights, gradients and optimizer state."""
    precision, optimizer = Precision(precision), Optimizer(optimizer)
    moments = {Optimizer.ADAM: 2, Optimizer.ADAMW: 2, Optimizer.SGD_MOMENTUM: 1, Optimizer.SGD: 0}[optimizer]
    if precision == Precision.FP32:
        return BytesPerParam(params=4, grads=4, optimizer=4 * moments)
    # Mixed precision: half-precision working copy + fp32 master weights inside the optimizer.
    return BytesPerParam(params=2, grads=2, optimizer=4 + 4 * moments)


def estimate(setup: TrainingSetup) -> MemoryEstimate:
    """Per-card model-state memory for ``setup``, with the formula in zh and en."""
    per = bytes_per_param(setup.precision, setup.optimizer)
    stage, n, psi = setup.effective_stage, setup.shard_group, setup.params
    p_div = n if stage >= 3 else 1
    g_div = n if stage >= 2 else 1
    o_div = n if stage >= 1 else 1
    params_b, grads_b, opt_b = per.params * psi / p_div, per.grads * psi / g_div, per.optimizer * psi / o_div
    cpu = 0.0
    if setup.offload_optimizer:
        cpu += opt_b
        opt_b = 0.0
    if setup.offload_params:
        cpu += params_b
        params_b = 0.0
    return MemoryEstimate(setup=setup, per_param=per, params_bytes=params_b, grads_bytes=grads_b,
                          optimizer_bytes=opt_b, cpu_bytes=cpu, formula=formula_text(setup, per))


def formula_text(setup: TrainingSetup, per: BytesPerParam) -> dict[str, str]:
    """The per-card formula as students see it, e.g. ``2Ψ + 2Ψ + 12Ψ/N``."""
    stage, n = setup.effective_stage, setup.shard_group
    p = f"{per.params}Ψ" + ("/N" if stage >= 3 else "")
    g = f"{per.grads}Ψ" + ("/N" if stage >= 2 else "")
    o = f"{per.optimizer}Ψ" + ("/N" if stage >= 1 else "")
    if setup.offload_optimizer:
        o = f"0 (CPU: {o})"
    if setup.offload_params:
        p = f"0 (CPU: {p})"
    expr = f"{p} + {g} + {o}"
    psi = f"Ψ = {setup.params:g}, N = {n}"
    return {
        "en": f"per card = weights {p} + gradients {g} + optimizer states {o}  ({psi}; ZeRO stage {stage})",
        "zh": f"每卡 = 权重 {p} + 梯度 {g} + 优化器状态 {o}（{psi}；ZeRO 第 {stage} 级）",
        "expr": expr,
    }


def full_training_bytes(params: float, precision: Precision | str = Precision.BF16_MIXED,
                        optimizer: Optimizer | str = Optimizer.ADAM) -> float:
    """Unsharded model-state bytes of full-parameter training (7B, mixed Adam -> 112e9)."""
    return bytes_per_param(precision, optimizer).total * params


def zero_stage_bytes(params: float, cards: int, stage: int, k: int = 12) -> float:
    """The ZeRO paper's closed form for mixed precision with optimizer multiplier ``k``."""
    if stage == 0:
        return (2 + 2 + k) * params
    if stage == 1:
        return 2 * params + 2 * params + k * params / cards
    if stage == 2:
        return 2 * params + (2 + k) * params / cards
    if stage == 3:
        return (2 + 2 + k) * params / cards
    raise ValueError("ZeRO stage must be 0, 1, 2 or 3")
