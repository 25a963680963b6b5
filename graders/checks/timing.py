"""How fast a rank trained, from its step records: throughput, its own time and idle time, the loss.

Used by the speed measurement (``graders.ddp_speedup.grader``, ``graders.ddp_speedup.calibration``) and the reports'
loss charts; the speed verdict itself is ``graders.ddp_speedup.speed``.
"""
from __future__ import annotations

import statistics

from graders.checks.records import rank_epochs, step_rows


def throughput(run, skip_fraction: float = 0.1, skip_min: int = 3) -> dict[str, float] | None:
    """Samples/s of the training loop, excluding start-up and the first steps.

    Time is each rank's own time (``own_time``: wall time less its wait for a busy CPU).
    ``loop``: samples over time between the first kept and the last step, summed
    over ranks. ``steady``: the same from median step interval and median samples
    per step, robust to a burst of interference from other jobs on the host. Both are
    multiplied by the fraction of distinct samples, so ranks that duplicate work
    do not look fast.
    """
    loop = steady = 0.0
    idles = []
    for r in range(run.nproc):
        rows = step_rows(run.ranks[r]) if r in run.ranks else []
        rows = rows[max(skip_min, int(len(rows) * skip_fraction)):]
        if len(rows) < 5:
            return None
        pairs = list(zip(rows, rows[1:]))
        dt = [own_time(a, b) for a, b in pairs]
        ds = [b["samples"] - a["samples"] for a, b in pairs]
        good = [(t, s) for t, s in zip(dt, ds) if s > 0 and t > 0]  # epoch boundaries reset counters
        if not good:
            return None
        loop += sum(s for _, s in good) / sum(t for t, _ in good)
        steady += statistics.median(s for _, s in good) / statistics.median(t for t, _ in good)
        idle = unexplained_idle(pairs, dt)
        if idle is not None:
            idles.append(idle)
    unique = unique_fraction(run)
    return {"loop": loop * unique, "steady": steady * unique, "unique_fraction": unique,
            "idle": round(max(idles), 3) if len(idles) == run.nproc else None}


def unexplained_idle(pairs: list[tuple[dict, dict]], own: list[float]) -> float | None:
    """Fraction of a rank's own time spent neither on a CPU nor inside ``DataLoader.__next__``.

    In a 1-process CPU run nothing else should make the main thread wait (there is no peer to
    wait for): a large value means the script sleeps. None when the harness could not see it.
    """
    nums = ("cpu", "data_wait")
    if not pairs or not all(isinstance(x.get(k), (int, float)) for a, b in pairs for x in (a, b) for k in nums):
        return None
    total = sum(own)
    if total <= 0:
        return None
    unexplained = sum(max(0.0, t - (b["cpu"] - a["cpu"]) - (b["data_wait"] - a["data_wait"]))
                      for (a, b), t in zip(pairs, own))
    return min(1.0, unexplained / total)


def own_time(a: dict, b: dict) -> float:
    """Wall time between two steps less the time the rank waited for a busy CPU (when the harness saw it).

    What remains is the script's own time (computing, communicating, sleeping): the host's load
    is taken out, so a verdict built on it does not move when other jobs share the machine.
    """
    dt = b["t"] - a["t"]
    ra, rb = a.get("runqueue"), b.get("runqueue")
    if isinstance(ra, (int, float)) and isinstance(rb, (int, float)) and 0 <= rb - ra < dt:
        return dt - (rb - ra)
    return dt


def unique_fraction(run) -> float:
    eps = rank_epochs(run)
    if len(eps) < 2 or not all(eps.values()) or eps[0][0]["kind"] == "iterable":
        return 1.0
    sets = [set(e[0]["indices"]) for e in eps.values()]
    total = sum(len(s) for s in sets)
    return len(set().union(*sets)) / total if total else 1.0


def loss_series(run, rank: int = 0, max_points: int = 400) -> list[float]:
    """Loss per optimizer step of one rank, thinned to at most ``max_points``."""
    if run is None or rank not in run.ranks:
        return []
    losses = [r["loss"] for r in step_rows(run.ranks[rank]) if r["loss"] is not None]
    stride = max(1, len(losses) // max_points)
    return [round(x, 5) for x in losses[::stride]]
