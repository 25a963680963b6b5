"""Who is graded next, and when: the fair queue's ordering and its expected start, as pure functions.

Near a deadline a FIFO lets one student who uploads twenty times sit ahead of everyone.
Here waiting submissions are ordered by

1. first gradings before regrades (an instructor's regrade of the whole class must not
   delay a student's first result);
2. fewest gradings started for that student in the recent window (default one hour):
   a student who was just graded waits behind one who was not, which is round-robin
   among students without per-student queues;
3. the time the student has been waiting (``since``; a replacement upload keeps the
   place of the one it replaced), then the submission id.

No Flask and no database here: ``server.grading.queue`` feeds these from SQL and the rush
benchmark (``bench/deadline_rush.py``) drives the very same functions in a simulation.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

DEFAULT_GRADING_S = 120.0  # expected grading time when nothing was graded recently


@dataclass(frozen=True)
class Waiting:
    """One waiting submission as the ordering sees it."""

    id: int
    student: int
    since: float  # seconds (any epoch): when the student started waiting for this result
    regrade: bool = False


def order_key(w: Waiting, recent: Mapping[int, int]) -> tuple:
    """The sort key of the fair queue (smaller runs first)."""
    return (w.regrade, recent.get(w.student, 0), w.since, w.id)


def fair_order(waiting: Iterable[Waiting], recent: Mapping[int, int]) -> list[Waiting]:
    """Waiting submissions in the order they should start; ``recent``: gradings started per student."""
    return sorted(waiting, key=lambda w: order_key(w, recent))


def fifo_order(waiting: Iterable[Waiting]) -> list[Waiting]:
    """The old queue, for comparison: first come, first served."""
    return sorted(waiting, key=lambda w: (w.since, w.id))


def typical_duration(durations: Sequence[float], default: float = DEFAULT_GRADING_S) -> float:
    """The median of recent grading durations (seconds), or ``default`` with none."""
    good = [d for d in durations if d is not None and math.isfinite(d) and d >= 0]
    return float(statistics.median(good)) if good else default


def eta_s(position: int, free_slots: int, slots: int, durations: Sequence[float],
          default: float = DEFAULT_GRADING_S) -> float | None:
    """Expected seconds until the submission at ``position`` (1-based) starts, or None if no slot serves it.

    The first ``free_slots`` in line start now; after that a slot frees about every
    ``typical / slots`` seconds, so the n-th one past the free slots waits n of those.
    """
    if slots <= 0 or position < 1:
        return None
    ahead = position - 1
    free_slots = max(0, min(free_slots, slots))
    if ahead < free_slots:
        return 0.0
    return (ahead - free_slots + 1) * typical_duration(durations, default) / slots


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0..100, nearest rank) of ``values``, None if empty."""
    if not values:
        return None
    s = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(s)))
    return float(s[min(rank, len(s)) - 1])
