"""The reference speed: settling, plausibility, freshness and the host lock (no torchrun here)."""
from __future__ import annotations

import multiprocessing
import time

import pytest

from graders import calibration


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
