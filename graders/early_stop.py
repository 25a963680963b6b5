"""Stop a run once its verdict is known: a script that is not distributed gains nothing from running on.

Early in a homework most uploads are the single-card starter: launched with N processes it trains
the whole data set N times over, and every check but the two run checks is already zeroed by "not
distributed" (issue 26 item 2). These predicates are handed to ``graders.torchrun.run`` as
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
