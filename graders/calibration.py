"""The reference solution's speed on this host, measured apart from students' jobs.

A student's speed is judged like with like: their 1-process throughput against the
reference's 1-process throughput and their N-process throughput against the
reference's N-process throughput, measured on the same host not long before.

* **When.** ``refresh_due()`` measures whatever is missing or older than
  ``calibration.max_age_hours``; the worker calls it at start-up and between jobs
  (``python -m graders.calibration`` does the same from cron). A grading that finds
  no usable value measures it first and tells the status page "calibrating, about N min".
* **Quiet host.** Calibration holds the host lock exclusively (``flock`` on files in
  ``<var>/calibration/``); a grading holds it shared while its own runs are timed, so
  a calibration never overlaps a grading and two calibrations never overlap each other.
  A second lock file (``intent``) keeps a waiting calibration from being starved by a
  stream of gradings.
* **Plausible values only.** A pair measured while the 1-minute load average exceeds the
  host's CPUs plus its own ranks plus ``max_extra_load`` is discarded. A measurement is kept when ``pairs`` interleaved
  1-process/N-process runs agree within ``max_spread``, and when its speedup is within
  ``max_drift`` of the last accepted value (unless two measurements in a row agree on the
  new value: the host changed). Otherwise the last accepted value stays and the attempt
  is recorded under ``rejected``.
"""
from __future__ import annotations

import contextlib
import fcntl
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from coursework import settings as course_settings
from graders import ddp_job, gpu_slots

DEFAULTS = {"pairs": 3, "max_pairs": 6, "max_spread": 1.3, "max_age_hours": 6, "max_drift": 1.5,
            "expected_s": 240, "max_extra_load": 1.0}
MAX_REJECTED_KEPT = 5
RETRY_AFTER_S = 3600


def var_dir() -> Path:
    return course_settings.var_dir() / "calibration"


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


# -- the host lock ------------------------------------------------------------------
def _lock_files() -> tuple[Path, Path]:
    d = var_dir()
    d.mkdir(parents=True, exist_ok=True)
    return d / "intent.lock", d / "host.lock"


@contextlib.contextmanager
def host_shared(on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Held by a grading while its runs are timed; waits (calling ``on_wait``) during a calibration."""
    intent_path, host_path = _lock_files()
    with open(intent_path, "a") as intent, open(host_path, "a") as host:
        try:
            fcntl.flock(intent, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait()
            fcntl.flock(intent, fcntl.LOCK_SH)
        try:
            fcntl.flock(host, fcntl.LOCK_SH)
        finally:
            fcntl.flock(intent, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(host, fcntl.LOCK_UN)


@contextlib.contextmanager
def host_exclusive() -> Iterator[None]:
    """Held while calibrating: no grading's runs and no other calibration at the same time."""
    intent_path, host_path = _lock_files()
    with open(intent_path, "a") as intent, open(host_path, "a") as host:
        fcntl.flock(intent, fcntl.LOCK_EX)  # new gradings now wait
        try:
            fcntl.flock(host, fcntl.LOCK_EX)  # running gradings finish first
            try:
                yield
            finally:
                fcntl.flock(host, fcntl.LOCK_UN)
        finally:
            fcntl.flock(intent, fcntl.LOCK_UN)


# -- state on disk ------------------------------------------------------------------
def _state_path(assignment_id: str, mode: str) -> Path:
    return var_dir() / f"{assignment_id}-{mode}.json"


def load_state(assignment_id: str, mode: str) -> dict[str, Any] | None:
    try:
        state = json.loads(_state_path(assignment_id, mode).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


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
def reference(cfg: dict, mode: str, *, on_wait: Callable[[int], None] | None = None,
              force: bool = False) -> dict[str, Any] | None:
    """The accepted reference value for this host, measuring it first if it is missing or stale.

    Returns ``{"t1", "tn", "speedup", "at", "pairs", ...}`` or None when no plausible value
    could be measured (the speed is then not graded on this host). ``on_wait(minutes)`` is
    called once if the caller has to wait for a calibration.
    """
    aid, ccfg = cfg["_id"], settings(cfg)
    key = host_key(cfg, mode)
    state = load_state(aid, mode)
    if fresh(state, key, ccfg["max_age_hours"]) and not force:
        return state["accepted"]
    if (not force and state and state.get("key") == key and not state.get("accepted")
            and time.time() - state.get("checked_at", 0) < RETRY_AFTER_S):
        return None  # failed recently: do not make every job wait for another failure
    if on_wait:
        on_wait(eta_minutes(aid, mode, cfg))
    with host_exclusive():
        state = load_state(aid, mode)  # someone else may have just measured it
        if fresh(state, key, ccfg["max_age_hours"]) and not force:
            return state["accepted"]
        state = state if state and state.get("key") == key else {"key": key, "accepted": None, "rejected": []}
        state["running_since"] = time.time()
        save_state(aid, mode, state)
        started = time.monotonic()
        try:
            pairs, value = _measure(cfg, mode, ccfg)
        finally:
            state.pop("running_since", None)
        state["took_s"] = round(time.monotonic() - started, 1)
        state["checked_at"] = time.time()
        attempt = {**(value or {}), "pairs": pairs, "at": time.time()}
        if value is None:
            attempt["reason"] = f"the reference's pairs did not agree within {ccfg['max_spread']}"
            ok = False
        else:
            ok, why = plausible(value, state.get("accepted"), state.get("rejected", []), float(ccfg["max_drift"]))
            attempt["reason"] = why
        if ok:
            state["accepted"], state["rejected"] = attempt, []
        else:
            state["rejected"] = (state.get("rejected", []) + [attempt])[-MAX_REJECTED_KEPT:]
        save_state(aid, mode, state)
        return state.get("accepted")


def _measure(cfg: dict, mode: str, ccfg: dict) -> tuple[list[dict[str, float]], dict[str, float] | None]:
    """Interleaved 1-process / N-process runs of the reference until ``pairs`` of them agree."""
    from graders import torchrun
    from graders.checks import ddp

    solution = Path(cfg["_path"]) / "solution" / "train.py"
    limits = torchrun.make_limits(cfg["limits"].get(mode, {}))
    n = int(cfg["nproc"])
    pairs: list[dict[str, float]] = []
    value = None
    with tempfile.TemporaryDirectory(prefix="distgrade-calib-") as tmp:
        job = Path(tmp)
        os.chmod(job, 0o711)
        script = ddp_job.stage_script(solution, job)
        data_dir, synthetic = ddp_job.data_dir(job, mode, cfg)
        for i in range(int(ccfg["max_pairs"])):
            runs = {}
            for k in (1, n):
                runs[k] = torchrun.run(script, k, root=job / f"p{i}-n{k}", data_dir=data_dir,
                                       epochs=int(cfg["epochs"][mode]), limits=limits, mode=mode,
                                       synthetic=synthetic, gpus=gpu_slots.assigned(k) if mode == "gpu" else None)
            t1, tn = ddp.throughput(runs[1]), ddp.throughput(runs[n])
            load = os.getloadavg()[0]
            if not quiet_enough(load, os.cpu_count() or 1, n, float(ccfg["max_extra_load"])):
                print(f"calibration pair {i} discarded: load average {load:.1f}", file=sys.stderr)
                t1 = tn = None
            if t1 and tn:
                pairs.append({"t1": round(t1["steady"], 3), "tn": round(tn["steady"], 3),
                              "speedup": round(tn["steady"] / t1["steady"], 4)})
            shutil.rmtree(job / f"p{i}-n1", ignore_errors=True)
            shutil.rmtree(job / f"p{i}-n{n}", ignore_errors=True)
            value = settled(pairs, int(ccfg["pairs"]), float(ccfg["max_spread"]))
            if value is not None:
                break
    return pairs, value


def calibrated_assignments() -> list[tuple[str, dict]]:
    """(id, cfg) of every assignment whose grader judges speed against a calibration."""
    from coursework import assignments
    out = []
    for a in assignments.all_assignments():
        if "calibration" in a.raw:
            out.append((a.id, {**a.raw, "_path": str(a.path), "_id": a.id}))
    return out


def refresh_due(mode: str = "cpu", *, force: bool = False) -> list[dict[str, Any]]:
    """Measure every calibration that is missing or stale on this host; for the worker's start-up and idle time.

    Returns one line of status per assignment: ``{"assignment", "speedup", "at"}`` (None values
    when no plausible value could be measured). Never raises for a failed measurement.
    """
    out = []
    for aid, cfg in calibrated_assignments():
        try:
            ref = reference(cfg, mode, force=force)
        except Exception as exc:  # staff see it in the worker's log; the next refresh tries again
            print(f"calibration of {aid} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            ref = None
        out.append({"assignment": aid, "speedup": ref and ref.get("speedup"), "at": ref and ref.get("at")})
    return out


def calibrate_forever(stop, mode: str = "cpu", every_s: float = 600.0) -> None:
    """A worker thread: refresh due calibrations at start-up, then every ``every_s`` until ``stop`` is set.

    For ``server/grading/worker.py``, beside its reconciler thread::

        from graders.calibration import calibrate_forever
        threading.Thread(target=calibrate_forever, args=(stop, "gpu" if app.config["WORKER_GPUS"] else "cpu"),
                         daemon=True).start()

    A refresh waits for the job being graded (shared host lock) and holds the next one back.
    """
    while not stop.is_set():
        refresh_due(mode)
        stop.wait(every_s)


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m graders.calibration",
                                     description="measure the reference solutions' speed on this host")
    parser.add_argument("--mode", choices=["cpu", "gpu"], default=os.environ.get("GRADER_MODE", "cpu"))
    parser.add_argument("--force", action="store_true", help="measure even if the stored value is fresh")
    args = parser.parse_args(argv)
    for line in refresh_due(args.mode, force=args.force):
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
