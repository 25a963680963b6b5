"""The reference solution's speed on this host, measured apart from students' jobs.

A student's speed is judged like with like: their 1-process throughput against the
reference's 1-process throughput and their N-process throughput against the
reference's N-process throughput, measured on the same host not long before.

* **When.** ``refresh_due()`` measures whatever is missing or older than
  ``calibration.max_age_hours``; the worker calls it at start-up and between jobs
  (``python -m graders.ddp_speedup.calibration`` does the same from cron). A grading never measures and
  never waits for a measurement: ``current()`` gives it the accepted value,
  or None, and its speed is then "pending calibration", re-scored when a value lands.
* **Quiet host, gradings first.** Calibration holds the host lock exclusively and only while no
  grading holds or wants it (``graders.host_lock``); a grading that arrives stops the current
  reference run within half a second (``Measured.yielded``), and the pairs measured so far count
  toward the next attempt. Every attempt goes to the state's ``history`` (the instructor's
  calibration page): accepted, rejected and why, gave way, and each pair discarded with its load.
* **Plausible values only.** A pair measured while the 1-minute load average exceeds the
  host's CPUs plus its own ranks plus ``max_extra_load`` is discarded. A measurement is kept when ``pairs`` interleaved
  1-process/N-process runs agree within ``max_spread``, and when its speedup is within
  ``max_drift`` of the last accepted value (unless two measurements in a row agree on the
  new value: the host changed). Otherwise the last accepted value stays and the attempt
  is recorded under ``rejected``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coursework import calibration_state
from graders import gpu_slots
from graders.ddp_speedup import job as ddp_job
from graders.host_lock import HostBusy, grading_wants_host, host_exclusive, host_shared  # noqa: F401 (re-exported)

DEFAULTS = {"pairs": 3, "max_pairs": 6, "max_spread": 1.3, "max_age_hours": 6, "max_drift": 1.5,
            "expected_s": 240, "max_extra_load": 1.0}
MAX_REJECTED_KEPT = 5
MAX_HISTORY = 30  # attempts shown on the instructor's calibration page
RETRY_AFTER_S = 3600
PARTIAL_KEEP_S = 3600  # pairs measured before giving way to a grading count toward the next attempt


var_dir = calibration_state.var_dir  # the state files: shared with the web app (coursework/calibration_state.py)


def settings(cfg: dict) -> dict[str, Any]:
    out = {**DEFAULTS, **cfg.get("calibration", {})}
    if "max_age_days" in cfg.get("calibration", {}) and "max_age_hours" not in cfg["calibration"]:
        out["max_age_hours"] = 24 * float(cfg["calibration"]["max_age_days"])
    return out


# -- pure decisions -------------------------------------------------------------------
def settled(pairs: list[dict[str, float]], n_pairs: int, max_spread: float) -> dict[str, float] | None:
    """Median t1, tn and speedup of the tightest ``n_pairs`` pairs if their speedups agree.

    Each pair is ``{"t1": samples/s with 1 process, "tn": with N, "speedup": tn / t1}``.
    A pair measured while the host was busy (0.41 beside 0.94 and 0.79) must not move
    the value every submission is judged against; None means "measure another pair".
    """
    if len(pairs) < n_pairs:
        return None
    ordered = sorted(pairs, key=lambda p: p["speedup"])
    windows = [ordered[i:i + n_pairs] for i in range(len(ordered) - n_pairs + 1)]
    best = min(windows, key=lambda w: w[-1]["speedup"] / w[0]["speedup"])
    if best[-1]["speedup"] / best[0]["speedup"] > max_spread:
        return None
    return {k: statistics.median(p[k] for p in best) for k in ("t1", "tn", "speedup")}


def settled_speedup(speedups: list[float], pairs: int, max_spread: float) -> float | None:
    """``settled`` for bare speedups (kept for callers that only have the ratios)."""
    got = settled([{"t1": 1.0, "tn": s, "speedup": s} for s in speedups], pairs, max_spread)
    return got["speedup"] if got else None


def quiet_enough(load_1min: float, cpus: int, nproc: int, slack: float) -> bool:
    """Was the host quiet while a pair ran? Its own ``nproc`` ranks plus ``slack`` runnable tasks at most.

    A reference measured while other jobs ran (load 15-18 on 2 cores gave 0.61x here, where a
    quieter host gives about 0.9x) would make every later grading look 1.5x better than it is.
    """
    return load_1min <= cpus + nproc + slack


def plausible(new: dict[str, float], last: dict[str, Any] | None, rejected: list[dict[str, Any]],
              max_drift: float) -> tuple[bool, str]:
    """Accept ``new`` (a settled value) given the last accepted one and recent rejections."""
    if last is None:
        return True, "first"
    ratio = new["speedup"] / last["speedup"] if last.get("speedup") else math.inf
    if 1 / max_drift <= ratio <= max_drift:
        return True, "close to the last accepted value"
    prev = rejected[-1] if rejected else None
    if prev and prev.get("speedup") and 1 / max_drift <= new["speedup"] / prev["speedup"] <= max_drift:
        return True, "two measurements in a row agree on a new value"
    return False, f"speedup {new['speedup']:.3f} is {ratio:.2f}x the last accepted {last['speedup']:.3f}"


def fresh(state: dict[str, Any] | None, key: dict[str, Any], max_age_hours: float, now: float | None = None) -> bool:
    """Is the accepted value in ``state`` for this key and recent enough to judge against?"""
    if not state or state.get("key") != key or not state.get("accepted"):
        return False
    now = time.time() if now is None else now
    checked = max(state["accepted"].get("at", 0), state.get("checked_at", 0))
    return now - checked < max_age_hours * 3600


# -- state on disk ------------------------------------------------------------------
_state_path = calibration_state.state_path
load_state = calibration_state.load_state


def save_state(assignment_id: str, mode: str, state: dict[str, Any]) -> None:
    """Replace the calibration state of ``assignment_id`` in ``mode`` (written whole, then renamed)."""
    path = _state_path(assignment_id, mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, path)


def eta_minutes(assignment_id: str, mode: str, cfg: dict) -> int:
    """About how long a calibration takes here: the last one's duration, else the configured guess."""
    state = load_state(assignment_id, mode) or {}
    took = state.get("took_s") or settings(cfg)["expected_s"]
    running = state.get("running_since")
    left = took - (time.time() - running) if running else took
    return max(1, math.ceil(left / 60))


def host_key(cfg: dict, mode: str) -> dict[str, Any]:
    import importlib.metadata
    solution = (Path(cfg["_path"]) / "solution" / "train.py").read_bytes()
    ccfg = {k: v for k, v in cfg.get("calibration", {}).items() if k != "max_age_hours"}
    return {"host": platform.node(), "cpus": os.cpu_count(), "mode": mode, "epochs": cfg["epochs"][mode],
            "torch": importlib.metadata.version("torch"), "solution": hashlib.sha256(solution).hexdigest()[:16],
            "synthetic": cfg.get("synthetic", {}), "calibration": ccfg}


# -- measuring ------------------------------------------------------------------------
def current(cfg: dict, mode: str) -> dict[str, Any] | None:
    """The accepted reference value a grading judges against now, or None ("pending calibration").

    Never measures: gradings do not wait for a calibration. A value past
    ``max_age_hours`` is due for a refresh but stands until one lands, up to ``max_stale_hours``.
    """
    ccfg = settings(cfg)
    state = load_state(cfg["_id"], mode)
    if not state or state.get("key") != host_key(cfg, mode) or not state.get("accepted"):
        return None
    stale_h = float(ccfg.get("max_stale_hours", 4 * float(ccfg["max_age_hours"])))
    return state["accepted"] if fresh(state, state["key"], stale_h) else None


def reference(cfg: dict, mode: str, *, on_wait: Callable[[int], None] | None = None,
              force: bool = False) -> dict[str, Any] | None:
    """The accepted reference value for this host, measuring it first if it is missing or stale.

    For the worker's idle time and the command line, never for a grading. Returns ``{"t1", "tn",
    "speedup", "at", "pairs", ...}`` or None when no plausible value exists yet. Raises HostBusy
    when a grading holds or wants the host (before or during the measurement: the pairs measured
    so far are kept for the next attempt). ``on_wait(minutes)`` is called once before measuring.
    """
    aid, ccfg = cfg["_id"], settings(cfg)
    key = host_key(cfg, mode)
    state = load_state(aid, mode)
    if fresh(state, key, ccfg["max_age_hours"]) and not force:
        return state["accepted"]
    if (not force and state and state.get("key") == key and not state.get("accepted")
            and time.time() - state.get("checked_at", 0) < RETRY_AFTER_S):
        return None  # failed recently: try again later rather than keep the host busy
    if on_wait:
        on_wait(eta_minutes(aid, mode, cfg))
    with host_exclusive():
        state = load_state(aid, mode)  # someone else may have just measured it
        if fresh(state, key, ccfg["max_age_hours"]) and not force:
            return state["accepted"]
        state = state if state and state.get("key") == key else {"key": key, "accepted": None, "rejected": [],
                                                                  "history": (state or {}).get("history", [])}
        state["running_since"] = time.time()
        save_state(aid, mode, state)
        started = time.monotonic()
        kept = [p for p in state.get("partial", []) if time.time() - p.get("at", 0) < PARTIAL_KEEP_S]
        measured = Measured(pairs=kept)
        try:
            _measure(cfg, mode, ccfg, measured)
        finally:
            state.pop("running_since", None)
        took = round(time.monotonic() - started, 1)
        if measured.yielded:
            state["partial"] = measured.pairs
            _remember(state, {"at": time.time(), "outcome": "yielded", "pairs": measured.pairs,
                              "discarded": measured.discarded, "took_s": took})
            save_state(aid, mode, state)
            raise HostBusy("gave way to a grading")
        state["took_s"], state["checked_at"], state["partial"] = took, time.time(), []
        value = measured.value
        attempt = {**(value or {}), "pairs": measured.pairs, "at": time.time()}
        if value is None:
            attempt["reason"] = f"the reference's pairs did not agree within {ccfg['max_spread']}"
            attempt["code"], ok = "spread", False
        else:
            ok, why = plausible(value, state.get("accepted"), state.get("rejected", []), float(ccfg["max_drift"]))
            attempt["reason"], attempt["code"] = why, "ok" if ok else "drift"
        if ok:
            state["accepted"], state["rejected"] = attempt, []
        else:
            state["rejected"] = (state.get("rejected", []) + [attempt])[-MAX_REJECTED_KEPT:]
        _remember(state, {**attempt, "outcome": "accepted" if ok else "rejected", "discarded": measured.discarded,
                          "took_s": took})
        save_state(aid, mode, state)
        return state.get("accepted")


def _remember(state: dict[str, Any], entry: dict[str, Any]) -> None:
    """Append one attempt to the state's ``history`` (what the instructor's calibration page shows)."""
    state["history"] = (state.get("history", []) + [entry])[-MAX_HISTORY:]


@dataclasses.dataclass
class Measured:
    """What one calibration attempt measured: kept pairs, discarded ones with their reason, the value."""

    pairs: list[dict[str, float]] = dataclasses.field(default_factory=list)
    discarded: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    value: dict[str, float] | None = None
    yielded: bool = False


def _measure(cfg: dict, mode: str, ccfg: dict, out: Measured | None = None) -> tuple[list[dict[str, float]], dict[str, float] | None]:
    """Interleaved 1-process / N-process runs of the reference until ``pairs`` of them agree.

    Gives way to a grading at once: the run in progress is stopped (its pair is not counted) and
    ``out.yielded`` is set. Returns (pairs, settled value or None).
    """
    from graders import torchrun
    from graders.checks import timing

    out = out if out is not None else Measured()
    solution = Path(cfg["_path"]) / "solution" / "train.py"
    limits = torchrun.make_limits(cfg["limits"].get(mode, {}))
    n = int(cfg["nproc"])
    give_way = lambda _streams: "grading" if grading_wants_host() else None  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="distgrade-calib-") as tmp:
        job = Path(tmp)
        os.chmod(job, 0o711)
        script = ddp_job.stage_script(solution, job)
        data_dir, synthetic = ddp_job.data_dir(job, mode, cfg)
        out.value = settled(out.pairs, int(ccfg["pairs"]), float(ccfg["max_spread"]))
        for i in range(max(0, int(ccfg["max_pairs"]) - len(out.pairs))):
            if out.value is not None:
                break
            runs = {}
            for k in (1, n):
                if grading_wants_host():
                    out.yielded = True
                    return out.pairs, None
                runs[k] = torchrun.run(script, k, root=job / f"p{i}-n{k}", data_dir=data_dir,
                                       epochs=int(cfg["epochs"][mode]), limits=limits, mode=mode,
                                       synthetic=synthetic is not None, gpus=gpu_slots.assigned(k) if mode == "gpu" else None,
                                       stop_when=give_way)
                shutil.rmtree(job / f"p{i}-n{k}", ignore_errors=True)
                if runs[k].stopped:
                    out.yielded = True
                    return out.pairs, None
            t1, tn = timing.throughput(runs[1]), timing.throughput(runs[n])
            load = os.getloadavg()[0]
            cpus = os.cpu_count() or 1
            if not quiet_enough(load, cpus, n, float(ccfg["max_extra_load"])):
                print(f"calibration pair {i} discarded: load average {load:.1f}", file=sys.stderr)
                out.discarded.append({"at": time.time(), "code": "load", "load": round(load, 2),
                                      "limit": cpus + n + float(ccfg["max_extra_load"]),
                                      "speedup": round(tn["steady"] / t1["steady"], 4) if t1 and tn else None})
            elif not (t1 and tn):  # say why: a time limit on a busy host, a crash, too few steps
                out.discarded.append({"at": time.time(), "code": "no_throughput", "load": round(load, 2),
                                      "runs": {str(k): _run_outcome(runs[k], limits.wall_s) for k in (1, n) if k in runs}})
            else:
                out.pairs.append({"t1": round(t1["steady"], 3), "tn": round(tn["steady"], 3),
                                  "speedup": round(tn["steady"] / t1["steady"], 4), "at": time.time()})
            out.value = settled(out.pairs, int(ccfg["pairs"]), float(ccfg["max_spread"]))
    return out.pairs, out.value


def _run_outcome(run, limit_s: float) -> dict[str, Any]:
    """How one reference run ended, for a pair that measured nothing: step records per rank, whether
    it hit its time limit (on a host at load 20 a 12-epoch 1-process run does, and its records are
    then lost), exit code."""
    from graders.checks import timing

    res = run.result
    return {"steps": [len(timing.step_rows(run.ranks[r])) if r in run.ranks else 0 for r in range(run.nproc)],
            "timed_out": bool(res.timed_out), "returncode": res.returncode, "wall_s": round(float(limit_s), 1)}


calibrated_assignments = calibration_state.calibrated_assignments


def refresh_due(mode: str = "cpu", *, force: bool = False) -> list[dict[str, Any]]:
    """Measure every calibration that is missing or stale on this host; for the worker's start-up and idle time.

    Returns one line per assignment: ``{"assignment", "speedup", "at", "busy", "landed"}``: ``busy``
    when it gave way to a grading (tried again soon), ``landed`` when a new value was accepted now
    (gradings left "pending calibration" can be re-scored). Never raises for a failed measurement.
    """
    out = []
    for aid, cfg in calibrated_assignments():
        before = ((load_state(aid, mode) or {}).get("accepted") or {}).get("at")
        busy = False
        try:
            ref = reference(cfg, mode, force=force or calibration_state.take_retry(aid, mode))
        except HostBusy:
            ref, busy = None, True
        except Exception as exc:  # staff see it in the worker's log; the next refresh tries again
            print(f"calibration of {aid} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            ref = None
        out.append({"assignment": aid, "speedup": ref and ref.get("speedup"), "at": ref and ref.get("at"),
                    "busy": busy, "landed": bool(ref and ref.get("at") != before)})
    return out


def calibrate_forever(stop, mode: str = "cpu", every_s: float = 600.0, retry_s: float = 60.0,
                      on_landed: Callable[[str, str, dict[str, Any]], None] | None = None) -> None:
    """A worker thread: refresh due calibrations at start-up and between jobs until ``stop`` is set.

    A refresh gives way to any grading (``host_shared``), so it is tried again after ``retry_s``
    while one is missing or gave way, else every ``every_s``. ``on_landed(assignment, mode, ref)``
    is called for each new accepted value (the worker re-scores gradings pending calibration).
    """
    while not stop.is_set():
        lines = refresh_due(mode)
        for line in lines:
            if line["landed"] and on_landed:
                try:
                    on_landed(line["assignment"], mode, load_state(line["assignment"], mode)["accepted"])
                except Exception as exc:  # a re-scoring bug must not stop calibrating
                    print(f"re-scoring after calibration of {line['assignment']} failed: {exc!r}", file=sys.stderr)
        waiting = any(line["busy"] or line["speedup"] is None for line in lines)
        until = time.monotonic() + (retry_s if waiting else every_s)
        while not stop.is_set() and time.monotonic() < until:  # a teacher's "measure again now" cuts the wait short
            if any(calibration_state.retry_requested(aid, mode) for aid, _ in calibrated_assignments()):
                break
            stop.wait(min(5.0, max(0.0, until - time.monotonic())))


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m graders.ddp_speedup.calibration",
                                     description="measure the reference solutions' speed on this host")
    parser.add_argument("--mode", choices=["cpu", "gpu"], default=os.environ.get("GRADER_MODE", "cpu"))
    parser.add_argument("--force", action="store_true", help="measure even if the stored value is fresh")
    args = parser.parse_args(argv)
    for line in refresh_due(args.mode, force=args.force):
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
