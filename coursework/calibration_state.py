"""The calibration state the worker writes and the web app reads (the instructor's calibration page).

``graders.calibration`` measures the reference solution on the grading host and writes one JSON file
per assignment and mode under ``<var>/calibration``; this module is the shared, measurement-free part:
where the files are, how to read one, which assignments are calibrated, and the speed a reference
must reach for the host to judge speed at all. The web app imports this, never ``graders``.
"""
from __future__ import annotations

import json
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


def calibrated_assignments() -> list[tuple[str, dict]]:
    """(id, cfg) of every assignment whose grader judges speed against a calibration."""
    from coursework import assignments
    out = []
    for a in assignments.all_assignments():
        if "calibration" in a.raw:
            out.append((a.id, {**a.raw, "_path": str(a.path), "_id": a.id}))
    return out


def min_reference_speedup(gate: dict[str, Any], nproc: int) -> float:
    """The reference speedup below which this host cannot judge speed for ``nproc`` processes."""
    if "min_reference_efficiency" in gate:
        return float(gate["min_reference_efficiency"]) * nproc
    return float(gate.get("min_reference_speedup", 1.0))
