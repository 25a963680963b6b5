"""The instructor's calibration page: the reference speed this host judges against, and its history.

Speed is judged against the reference solution measured on the grading host (``graders.ddp_speedup.calibration``, which writes
the state files read here through ``coursework.calibration_state``).
Staff see, per calibrated assignment and mode: the accepted value and whether it lets this host grade
speed at all (the reference must reach ``calibration_state.host_bar``: a bar from this host's own
spread of pair ratios, or ``host_gate``'s fixed one before there is a calibration to take it from), then every recent
attempt with its pairs, the pairs discarded and why (a busy host), why an attempt was rejected, and when
a calibration gave way to a grading. All of it is read from the state files; nothing is measured here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _

from coursework import calibration_state

from server.access import course_or_404
from server.dashboard.views import bp


@dataclass
class CalibrationView:
    """One assignment in one mode, ready for the template."""

    assignment: str
    mode: str
    accepted: dict[str, Any] | None
    threshold: float
    grades_speed: bool | None  # None: no accepted value yet (gradings are "pending calibration")
    running_since: datetime | None
    history: list[dict[str, Any]] = field(default_factory=list)
    bar: dict[str, Any] = field(default_factory=dict)  # calibration_state.host_bar: how ``threshold`` was found
    load_limit: float = 0.0  # the 1-minute load average a pair may be measured under
    last_load: float | None = None  # the load average when the last pair was discarded for load
    retry_requested: bool = False


def _when(ts: Any) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=timezone.utc).replace(tzinfo=None) if isinstance(ts, (int, float)) else None


def calibration_views() -> list[CalibrationView]:
    """Every calibrated assignment's state on this host, newest attempt first."""
    out = []
    for aid, cfg in calibration_state.calibrated_assignments():
        scfg = cfg.get("checks", {}).get("speedup", {})
        gate = scfg.get("host_gate", {})
        for mode in ("cpu", "gpu"):
            state = calibration_state.load_state(aid, mode)
            if state is None and mode == "gpu":
                continue
            state = state or {}
            accepted = state.get("accepted")
            history = [{**h, "when": _when(h.get("at")),
                        "ratios": [p.get("speedup") for p in h.get("pairs", []) if isinstance(p, dict)]}
                       for h in reversed(state.get("history", [])) if isinstance(h, dict)]
            bar = calibration_state.host_bar(gate, int(cfg.get("nproc", 2)), accepted,
                                             float(scfg.get("bands", {}).get("pass", 0.8)),
                                             int(scfg.get("repeat", {}).get("pairs", 1)))
            threshold = bar["bar"]
            slack = float(cfg.get("calibration", {}).get("max_extra_load", 1.0))
            loads = [d.get("load") for h in history for d in (h.get("discarded") or []) if d.get("code") == "load"]
            out.append(CalibrationView(
                assignment=aid, mode=mode, accepted={**accepted, "when": _when(accepted.get("at"))} if accepted else None,
                threshold=threshold,
                grades_speed=None if not accepted else float(accepted.get("speedup", 0)) >= threshold,
                running_since=_when(state.get("running_since")), history=history, bar=bar,
                load_limit=(os.cpu_count() or 1) + int(cfg.get("nproc", 2)) + slack,
                last_load=loads[0] if loads else None,
                retry_requested=calibration_state.retry_requested(aid, mode)))
    return out


@bp.route("/<code>/calibration")
def calibration_page(code: str):
    """This host's calibration of the reference solutions, with why pairs and attempts were rejected."""
    course = course_or_404(code, instructor=True)
    return render_template("dashboard/calibration.html", course=course, views=calibration_views())


@bp.post("/<code>/calibration/retry")
def calibration_retry(code: str):
    """Ask the workers to measure one calibration again now (after the host was made quiet)."""
    course = course_or_404(code, instructor=True)
    known = {(aid, mode) for aid, _ in calibration_state.calibrated_assignments() for mode in ("cpu", "gpu")}
    key = (request.form.get("assignment", ""), request.form.get("mode", ""))
    if key not in known:
        abort(400)
    calibration_state.request_retry(*key)
    flash(_("A new measurement was requested: a worker starts it within a minute, between gradings."), "info")
    return redirect(url_for("dashboard.calibration_page", code=course.code))


def measuring_now() -> list[tuple[str, str, datetime]]:
    """(assignment, mode, since) of every calibration a worker is measuring now (the queue page)."""
    out = []
    for aid, _cfg in calibration_state.calibrated_assignments():
        for mode in ("cpu", "gpu"):
            since = _when((calibration_state.load_state(aid, mode) or {}).get("running_since"))
            if since is not None:
                out.append((aid, mode, since))
    return out
