"""The calibration state the worker writes and the web app reads (the instructor's calibration page).

``graders.ddp_speedup.calibration`` measures the reference solution on the grading host and writes one JSON file
per assignment and mode under ``<var>/calibration``; this module is the shared, measurement-free part:
where the files are, how to read one, which assignments are calibrated, and the speed a reference
must reach for the host to judge speed at all. The web app imports this, never ``graders``.
"""
from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

from coursework import settings as course_settings


def var_dir() -> Path:
    """Where the calibration state files are: ``<var>/calibration``."""
    return course_settings.var_dir() / "calibration"


def state_path(assignment_id: str, mode: str) -> Path:
    return var_dir() / f"{assignment_id}-{mode}.json"


def load_state(assignment_id: str, mode: str) -> dict[str, Any] | None:
    """The stored calibration state of ``assignment_id`` in ``mode``, None when missing or unreadable."""
    try:
        state = json.loads(state_path(assignment_id, mode).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def retry_path(assignment_id: str, mode: str) -> Path:
    """A teacher's request to measure again now (the calibration page's button)."""
    return var_dir() / f"{assignment_id}-{mode}.retry"


def request_retry(assignment_id: str, mode: str) -> None:
    """Ask the workers to measure ``assignment_id`` in ``mode`` again at their next look (within a minute)."""
    path = retry_path(assignment_id, mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(time.time()))


def retry_requested(assignment_id: str, mode: str) -> bool:
    return retry_path(assignment_id, mode).exists()


def take_retry(assignment_id: str, mode: str) -> bool:
    """True (once) when a teacher asked for a new measurement since the last look."""
    try:
        retry_path(assignment_id, mode).unlink()
        return True
    except FileNotFoundError:
        return False


def calibrated_assignments() -> list[tuple[str, dict]]:
    """(id, cfg) of every assignment whose grader judges speed against a calibration."""
    from coursework import assignments
    out = []
    for a in assignments.all_assignments():
        if "calibration" in a.raw:
            out.append((a.id, {**a.raw, "_path": str(a.path), "_id": a.id}))
    return out


MEDIAN_SD = 1.2533  # sd of the median of k samples ~ 1.2533 sd / sqrt(k) (normal samples)


def host_bar(gate: dict[str, Any], nproc: int, ref: dict[str, Any] | None = None,
             pass_band: float = 0.8, graded_pairs: int = 3) -> dict[str, Any]:
    """The reference speedup this host needs to judge speed for ``nproc`` processes, and why.

    With ``gate["from_spread"]`` and a calibration ``ref`` whose ``pairs`` hold at least ``min_pairs``
    ratios, the bar comes from this host's own noise: ``spread`` is the relative sd of one pair's
    ratio among the reference's pairs, ``d`` that of a median of ``graded_pairs`` pairs (what a
    grading measures). A correct script (about the reference's speedup R) must stand ``margin`` such
    spreads above one that gains nothing (1.0x), and a 1.0x script ``margin`` spreads below the pass
    band (``pass_band`` R):  R >= (1 + m d) / (1 - m d)  and  R >= (1 + m d) / pass_band.
    A quiet GPU pair (ratios 1.47-1.53) then needs about 1.28x; a busy 2-core CPU (0.49-0.70x) about 1.5x.
    Otherwise (no such calibration yet, or a gate without ``from_spread``) the gate's fixed
    ``min_reference_speedup`` or ``min_reference_efficiency`` times N.

    Returns ``{"bar", "basis": "spread" | "fixed", "spread", "pairs"}`` (spread and pairs: None when fixed).
    """
    fixed = (float(gate["min_reference_efficiency"]) * nproc if "min_reference_efficiency" in gate
             else float(gate.get("min_reference_speedup", 1.0)))
    rule = gate.get("from_spread")
    ratios = [p["tn"] / p["t1"] for p in (ref or {}).get("pairs", []) or []
              if isinstance(p, dict) and _positive(p.get("t1")) and _positive(p.get("tn"))]
    if not isinstance(rule, dict) or len(ratios) < int(rule.get("min_pairs", 3)):
        return {"bar": fixed, "basis": "fixed", "spread": None, "pairs": None}
    spread = statistics.stdev(ratios) / statistics.fmean(ratios)
    d = float(rule.get("margin", 2)) * MEDIAN_SD * spread / math.sqrt(max(1, graded_pairs))
    ceiling = nproc * 1.25  # no reference gets past this (superlinear): unreachable means "not graded"
    bar = ceiling if d >= 1 else min(ceiling, max((1 + d) / (1 - d), (1 + d) / pass_band))
    return {"bar": math.ceil(bar * 100 - 1e-9) / 100, "basis": "spread", "spread": round(spread, 4),
            "pairs": len(ratios)}


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and math.isfinite(value)


def min_reference_speedup(gate: dict[str, Any], nproc: int, ref: dict[str, Any] | None = None,
                          pass_band: float = 0.8, graded_pairs: int = 3) -> float:
    """The reference speedup below which this host cannot judge speed for ``nproc`` processes (``host_bar``)."""
    return host_bar(gate, nproc, ref, pass_band, graded_pairs)["bar"]
