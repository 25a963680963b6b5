"""Stop a run once its verdict is known: a script that is not distributed gains nothing from running on.

Early in a homework most uploads are the single-card starter: launched with N processes it trains
the whole data set N times over, and every check but the two run checks is already zeroed by "not
distributed". These predicates are handed to ``graders.torchrun.run`` as
``stop_when``: they read the records received so far (untrusted: only counts and a world size are
read, every value type-checked) and return a reason once the evidence is in, or None.

A script can only make itself look *less* distributed here: delaying ``init_process_group`` past
the first ``min_steps`` steps earns the not-distributed verdict it would otherwise have avoided
by calling it where the chapter says, at the start.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

NO_PROCESS_GROUP = "no_process_group"
NO_SYNC = "no_sync"
ENOUGH_STEPS = "enough_steps"


def steps_taken(records: list[Any]) -> int:
    """Optimizer steps a rank reported so far (its ``steps`` records, flushed every 25 steps)."""
    n = 0
    for rec in records:
        if isinstance(rec, dict) and rec.get("type") == "steps" and isinstance(rec.get("t"), list):
            n += len(rec["t"])
    return n


def joined_group(records: list[Any]) -> bool:
    """Did this rank report a process group of more than one process?"""
    return any(isinstance(rec, dict) and rec.get("type") == "process_group" and isinstance(rec.get("world"), int)
               and not isinstance(rec.get("world"), bool) and rec["world"] > 1 for rec in records)


def epoch_seen(records: list[Any]) -> bool:
    """Has this rank finished one pass over a DataLoader (the record the batch-size report reads)?"""
    return any(isinstance(rec, dict) and rec.get("type") == "epoch" for rec in records)


def far_enough(records: list[Any], min_steps: int, max_steps: int) -> bool:
    """``min_steps`` steps and a first epoch, or ``max_steps`` steps for a script whose epochs are long."""
    steps = steps_taken(records)
    return steps >= min_steps and (epoch_seen(records) or steps >= max_steps)


def raised(records: list[Any]) -> bool:
    return any(isinstance(rec, dict) and rec.get("type") == "exception" for rec in records)


def not_distributed(nproc: int, min_steps: int, max_steps: int) -> Callable[[dict[int, Any]], str | None]:
    """``NO_PROCESS_GROUP`` once every one of ``nproc`` ranks got ``far_enough`` without a process group.

    The harness reports the group when it is created (or at the first step that finds it), before
    that step's record, so a rank's stream holding ``min_steps`` steps and no group is a rank that
    trained that far alone. A rank that raised is left to end by itself (its traceback is the verdict).
    """
    def decide(streams: dict[int, Any]) -> str | None:
        if nproc < 2 or len(streams) < nproc:
            return None
        for rank in range(nproc):
            stream = streams.get(rank)
            if stream is None:
                return None
            records = list(stream.records)  # a reader thread may be appending
            if raised(records) or joined_group(records) or not far_enough(records, min_steps, max_steps):
                return None
        return NO_PROCESS_GROUP
    return decide


def epochs_seen(records: list[Any]) -> int:
    """Passes over a DataLoader this rank finished (``epoch`` records)."""
    return sum(1 for rec in records if isinstance(rec, dict) and rec.get("type") == "epoch")


def _digests(records: list[Any]) -> dict[int, str]:
    """step -> the digest of the parameters the optimizers stepped (``params`` records, type-checked)."""
    out: dict[int, str] = {}
    for rec in records:
        if isinstance(rec, dict) and rec.get("type") == "params" and rec.get("sharded") is not True:
            step, digest = rec.get("step"), rec.get("digest")
            if isinstance(step, int) and not isinstance(step, bool) and isinstance(digest, str):
                out.setdefault(step, digest[:64])
    return out


def _synced_somewhere(records: list[Any]) -> bool:
    """Any sign of a synchroniser on this rank: a DDP bucket synced, gradients all-reduced by hand, FSDP."""
    for rec in records:
        if not isinstance(rec, dict):
            continue
        kind = str(rec.get("type", ""))
        if kind.startswith("fsdp") or (kind == "norms" and rec.get("sharded") is True):
            return True
        if kind == "steps":
            for name in ("synced", "hand_reduced"):
                values = rec.get(name)
                if isinstance(values, list) and any(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                                                    for v in values):
                    return True
    return False


def not_synchronised(nproc: int, min_steps: int, max_steps: int) -> Callable[[dict[int, Any]], str | None]:
    """``NO_SYNC`` once every rank formed the process group, got ``far_enough`` and through two epochs
    (so the reshuffle check has its two), no rank shows any synchroniser at work, and the stepped
    parameters of some rank already differ from rank 0's at a step both reported.

    Conservative by construction: DDP, a by-hand all-reduce (even of a few gradients) or FSDP anywhere
    keeps the run going, and so do equal parameters; what stops it is exactly what ``ddp.grad_sync``
    fails on (``graders.checks.sync.compare_params``), which the rest of the run cannot undo.
    """
    def decide(streams: dict[int, Any]) -> str | None:
        if nproc < 2 or len(streams) < nproc:
            return None
        digests = []
        for rank in range(nproc):
            stream = streams.get(rank)
            if stream is None:
                return None
            records = list(stream.records)  # a reader thread may be appending
            if (raised(records) or not joined_group(records) or not far_enough(records, min_steps, max_steps)
                    or (epochs_seen(records) < 2 and steps_taken(records) < max_steps) or _synced_somewhere(records)):
                return None
            digests.append(_digests(records))
        common = set.intersection(*(set(d) for d in digests))
        if any(d[step] != digests[0][step] for step in common for d in digests[1:]):
            return NO_SYNC
        return None
    return decide


def either(*predicates: Callable[[dict[int, Any]], str | None]) -> Callable[[dict[int, Any]], str | None]:
    """The first reason any of ``predicates`` gives."""
    def decide(streams: dict[int, Any]) -> str | None:
        for predicate in predicates:
            why = predicate(streams)
            if why:
                return why
        return None
    return decide


def enough_steps(nproc: int, min_steps: int, max_steps: int) -> Callable[[dict[int, Any]], str | None]:
    """``ENOUGH_STEPS`` once every rank got ``far_enough`` without raising (a bounded run)."""
    def decide(streams: dict[int, Any]) -> str | None:
        if len(streams) < nproc:
            return None
        for rank in range(nproc):
            stream = streams.get(rank)
            records = list(stream.records) if stream is not None else []
            if stream is None or raised(records) or not far_enough(records, min_steps, max_steps):
                return None
        return ENOUGH_STEPS
    return decide
