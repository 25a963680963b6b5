"""What the harness recorded in a rank, read as rows: the epochs of the training loader and the
optimizer steps. Shared by the checks (``graders.checks.ddp``, ``graders.fsdp_fit.checks``) and the timing
(``graders.checks.timing``); pure functions over ``graders.torchrun`` streams and runs.
"""
from __future__ import annotations

from typing import Any


def epochs_of(stream) -> list[dict]:
    """The epochs of the training loader: the dataset the rank consumed most samples from."""
    by_loader: dict[Any, list[dict]] = {}
    for r in stream.of("epoch"):
        by_loader.setdefault(r["loader"], []).append(r)
    if not by_loader:
        return []
    eps = max(by_loader.values(), key=lambda es: sum(len(e["indices"]) for e in es))
    full = [e for e in eps if e["complete"]]
    return full or [max(eps, key=lambda e: len(e["indices"]))]


def rank_epochs(run) -> dict[int, list[dict]]:
    return {r: epochs_of(run.ranks[r]) for r in range(run.nproc) if r in run.ranks}


def step_rows(stream) -> list[dict]:
    rows = []
    for rec in stream.of("steps"):
        for i in range(len(rec["t"])):
            row = {k: rec[k][i] for k in ("t", "samples", "loss", "backwards", "synced")}
            for name, default in (("hand_reduced", 0.0), ("runqueue", None), ("cpu", None), ("data_wait", None),
                                  ("seen", None), ("unread", None), ("pd", None), ("gl", None), ("ga", None),
                                  ("pl", None), ("ps", None), ("gn", None), ("gz", None), ("ar", None)):
                got = rec.get(name)
                row[name] = got[i] if isinstance(got, list) and i < len(got) else default
            rows.append(row)
    return rows
