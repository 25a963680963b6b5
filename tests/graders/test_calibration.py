"""The reference speed: settling, plausibility, freshness and the host lock (no torchrun here)."""
from __future__ import annotations

import multiprocessing
import time

import pytest

from graders.ddp_speedup import calibration


def _pairs(*speedups, t1=1000.0):
    return [{"t1": t1, "tn": t1 * s, "speedup": s} for s in speedups]


def test_settled_takes_the_tightest_window_and_its_throughputs():
    got = calibration.settled(_pairs(0.94, 0.79, 0.41, 0.86), 3, 1.3)
    assert got["speedup"] == pytest.approx(0.86) and got["t1"] == 1000.0 and got["tn"] == pytest.approx(860.0)
    assert calibration.settled(_pairs(0.94, 0.79, 0.41), 3, 1.3) is None


def test_an_implausible_reference_is_rejected_and_the_last_accepted_kept():
    last = {"speedup": 1.8, "t1": 1000.0, "tn": 1800.0}
    assert calibration.plausible({"speedup": 1.7}, last, [], 1.5)[0]
    ok, why = calibration.plausible({"speedup": 0.6}, last, [], 1.5)  # measured while two gradings ran
    assert not ok and "last accepted" in why
    # the host really changed: two measurements in a row agree on the new value
    assert calibration.plausible({"speedup": 0.62}, last, [{"speedup": 0.6}], 1.5)[0]
    assert calibration.plausible({"speedup": 0.6}, None, [], 1.5) == (True, "first")


def test_a_reference_is_fresh_only_for_its_key_and_for_hours_not_days():
    key = {"host": "h"}
    state = {"key": key, "accepted": {"speedup": 1.8, "at": 1000.0}}
    assert calibration.fresh(state, key, 6, now=1000.0 + 5 * 3600)
    assert not calibration.fresh(state, key, 6, now=1000.0 + 7 * 3600)
    assert not calibration.fresh(state, {"host": "other"}, 6, now=1001.0)
    assert not calibration.fresh({"key": key, "accepted": None}, key, 6, now=1001.0)


def _hold_exclusive(var, ready, release):
    import os
    os.environ["DISTGRADE_VAR_DIR"] = var
    with calibration.host_exclusive():
        ready.set()
        release.wait(10)


def test_a_grading_waits_for_a_calibration_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path))
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_exclusive, args=(str(tmp_path), ready, release))
    proc.start()
    try:
        assert ready.wait(10)
        waited = []

        def on_wait():
            waited.append(time.monotonic())
            release.set()
        t = time.monotonic()
        with calibration.host_shared(on_wait=on_wait):
            got_at = time.monotonic()
        assert waited and got_at >= waited[0] >= t
    finally:
        release.set()
        proc.join(10)
    with calibration.host_shared(on_wait=lambda: pytest.fail("nothing to wait for")):
        with calibration.host_shared(on_wait=lambda: pytest.fail("gradings share the host")):
            pass


def test_eta_comes_from_the_last_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path))
    cfg = {"calibration": {"expected_s": 240}}
    assert calibration.eta_minutes("ddp_speedup", "cpu", cfg) == 4
    calibration.save_state("ddp_speedup", "cpu", {"took_s": 130, "running_since": time.time() - 10})
    assert calibration.eta_minutes("ddp_speedup", "cpu", cfg) == 2


def test_a_failed_calibration_is_not_retried_by_every_job(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path))
    from coursework import assignments
    a = assignments.load("ddp_speedup")
    cfg = {**a.raw, "_path": str(a.path), "_id": a.id}
    key = calibration.host_key(cfg, "cpu")
    calibration.save_state(a.id, "cpu", {"key": key, "accepted": None, "rejected": [], "checked_at": time.time()})
    monkeypatch.setattr(calibration, "_measure", lambda *a, **k: pytest.fail("measured again"))
    assert calibration.reference(cfg, "cpu", on_wait=lambda m: pytest.fail("waited")) is None


def test_pairs_measured_on_a_busy_host_are_discarded():
    assert calibration.quiet_enough(3.5, cpus=2, nproc=2, slack=1.0)  # the calibration's own ranks and a little
    assert not calibration.quiet_enough(15.0, cpus=2, nproc=2, slack=1.0)  # other gradings running beside it


# -- calibration never holds a student's job hostage ------------------------------
def _cfg():
    from coursework import assignments
    a = assignments.load("ddp_speedup")
    return {**a.raw, "_path": str(a.path), "_id": a.id}


def test_a_grading_never_measures_the_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path))
    monkeypatch.setattr(calibration, "_measure", lambda *a, **k: pytest.fail("a grading measured the reference"))
    cfg = _cfg()
    assert calibration.current(cfg, "cpu") is None  # nothing yet: "pending calibration"
    key = calibration.host_key(cfg, "cpu")
    old = {"t1": 1.0, "tn": 1.5, "speedup": 1.5, "at": time.time() - 10 * 3600}
    calibration.save_state(cfg["_id"], "cpu", {"key": key, "accepted": old, "rejected": []})
    assert calibration.current(cfg, "cpu") == old  # due for a refresh, but it stands until one lands
    calibration.save_state(cfg["_id"], "cpu", {"key": {**key, "torch": "0"}, "accepted": old, "rejected": []})
    assert calibration.current(cfg, "cpu") is None  # another torch: another host as far as speed goes


def test_a_calibration_gives_way_to_a_grading(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path))
    assert not calibration.grading_wants_host()
    with calibration.host_shared():
        assert calibration.grading_wants_host()
        with pytest.raises(calibration.HostBusy):
            with calibration.host_exclusive():
                pytest.fail("calibrated while a grading held the host")
    with calibration.host_exclusive():
        pass


def _calibrate_on_a_busy_host(var: str) -> None:
    import os
    os.environ["DISTGRADE_VAR_DIR"] = var
    cfg = _cfg()
    cfg["calibration"] = {**cfg["calibration"], "max_extra_load": -1000}  # every pair discarded: a busy host
    try:
        calibration.reference(cfg, "cpu", force=True)
    except calibration.HostBusy:
        os._exit(3)
    os._exit(0)


@pytest.mark.slow
def test_a_grading_on_a_busy_uncalibrated_host_starts_within_a_minute(tmp_path):
    """The real thing: a calibration of the reference is running (and would run for many minutes, since
    the host is too busy for any pair to count); a grading submitted now starts its runs within a minute,
    the calibration gives way and keeps its history, and the grading is not held for speed."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    var = tmp_path / "var"
    ctx = multiprocessing.get_context("fork")
    calib = ctx.Process(target=_calibrate_on_a_busy_host, args=(str(var),))
    calib.start()
    try:
        state_file = var / "calibration" / "ddp_speedup-cpu.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and '"running_since"' not in (state_file.read_text() if state_file.exists() else ""):
            time.sleep(0.2)
        assert state_file.exists(), "the calibration never started"
        time.sleep(3)  # its first reference run is under way
        progress = tmp_path / "progress.json"
        starter = Path(calibration.__file__).parents[2] / "assignments" / "ddp_speedup" / "starter" / "train.py"
        env = {**os.environ, "DISTGRADE_VAR_DIR": str(var), "DISTGRADE_PROGRESS_FILE": str(progress)}
        env.pop("DISTGRADE_FAST", None)
        submitted = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "graders", "grade", "ddp_speedup", str(starter), "--json"],
                                env=env, stdout=subprocess.PIPE, text=True)
        started = None
        while started is None and proc.poll() is None and time.monotonic() - submitted < 120:
            try:
                if json.loads(progress.read_text()).get("phase", "").startswith("run."):
                    started = time.monotonic() - submitted
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        out, _ = proc.communicate(timeout=300)
        assert started is not None and started < 60, f"the grading started after {started} s"
        report = json.loads(out)
        by = {c["id"]: c for c in report["checks"]}
        assert by["run.single"]["status"] == "pass" and by["run.distributed"]["status"] == "fail"
        calib.join(60)
        assert calib.exitcode == 3  # it gave way (HostBusy)
        history = json.loads(state_file.read_text())["history"]
        assert history[-1]["outcome"] == "yielded"
    finally:
        if calib.is_alive():
            calib.terminate()
            calib.join(10)
