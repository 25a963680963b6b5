"""Pure decisions of graders.ddp_speedup.speed: whether this host can judge speed, and the speed score.

Seen before: on a 2-core host the reference reached 1.01x, and the score was noise (a correct
script at 0.98x got 5/10, one without a DistributedSampler at 0.79x got 9.15/10). A host whose
reference cannot show a real speedup does not grade speed; where speed is graded the score never
falls as the speedup rises, nothing below 1.0x earns more than 1.0x, and a score rests on the
median of repeated, interleaved 1-process / N-process pairs.
"""
from __future__ import annotations

import pytest

from coursework import assignments
from coursework.report import CheckResult, CheckStatus, text
from graders.ddp_speedup import speed

BANDS = {"pass": 0.8, "fail_below": 0.5, "min_raw": 1.0, "max_efficiency": 1.25, "single_ratio": 0.6}
GATE = {"min_reference_speedup": 1.3}
REF = {"t1": 1000.0, "tn": 1800.0, "speedup": 1.8}


def pairs(*ratios, t1=1000.0):
    return [{"t1": t1, "tn": t1 * r} for r in ratios]


def test_the_issue_host_does_not_grade_speed():
    """The measured 2-core host: reference 1.01x. Every script there gets 'not graded on this host'."""
    calib = {"t1": 1000.0, "tn": 1010.0, "speedup": 1.01}
    for ratio in (0.98, 1.63, 0.79, 0.80):  # the correct, buggy, no-sampler and reference scripts of the issue
        got = speed.judge(pairs(ratio, ratio, ratio), 2, calib, BANDS, GATE)
        assert (got.status, got.key) == (CheckStatus.SKIP, "host_no_gain"), (ratio, got)
        assert got.evidence["min_reference_speedup"] == 1.3 and got.evidence["reference"] == 1.01


def test_no_calibration_yet_is_pending_not_a_verdict():
    got = speed.judge(pairs(1.7, 1.8, 1.75), 2, None, BANDS, GATE)
    assert (got.status, got.key) == (CheckStatus.SKIP, "pending_calibration")
    assert got.evidence["pairs"] == pairs(1.7, 1.8, 1.75)  # enough to re-score without rerunning


def test_score_is_monotonic_and_nothing_below_one_beats_one():
    grid = [x / 100 for x in range(30, 226)]  # 0.30x .. 2.25x with 2 processes (2.5x is superlinear)
    fractions = []
    for raw in grid:
        got = speed.judge(pairs(raw, raw, raw), 2, REF, BANDS, GATE)
        fractions.append(got.fraction if got.status != CheckStatus.PASS else 1.0)
    assert fractions == sorted(fractions), "the score fell while the speedup rose"
    at_one = fractions[grid.index(1.0)]
    assert all(f <= at_one for raw, f in zip(grid, fractions) if raw < 1.0)
    assert fractions[grid.index(0.79)] == 0.0  # the issue's no-sampler script: slower with 2 processes


def test_median_of_paired_ratios_ignores_one_disturbed_pair():
    got = speed.judge(pairs(1.75, 0.9, 1.8), 2, REF, BANDS, GATE)  # one pair ran beside another job
    assert got.status == CheckStatus.PASS and got.evidence["raw"] == 1.75
    assert got.evidence["ratios"] == [1.75, 0.9, 1.8]


def test_pairs_are_paired_not_pooled():
    """The median of each pair's own ratio, not median(tn) / median(t1) across pairs."""
    ps = [{"t1": 1000.0, "tn": 1500.0}, {"t1": 500.0, "tn": 900.0}, {"t1": 2000.0, "tn": 3700.0}]
    assert speed.paired(ps)["speedup"] == pytest.approx(1.8)


@pytest.mark.parametrize("ps, key", [
    (pairs(6.0, 6.0, 6.0, t1=300.0), "superlinear"),
    (pairs(0.95, 0.95, 0.95), "below_one"),
    (pairs(1.0, 1.0, 1.0), "partial"),
    (pairs(0.6, 0.6, 0.6), "below_one"),
    (pairs(1.3, 1.3, 1.3), "partial"),
    (pairs(2.0, 2.0, 2.0), "pass"),
])
def test_verdicts(ps, key):
    assert speed.judge(ps, 2, REF, BANDS, GATE).key == key


def test_a_held_back_single_run_still_fails():
    got = speed.judge([{"t1": 400.0, "tn": 1000.0}], 2, {"t1": 1000.0, "tn": 1400.0, "speedup": 1.4}, BANDS, GATE)
    assert (got.status, got.key) == (CheckStatus.FAIL, "slow_single")


def test_a_single_run_that_sleeps_is_caught_without_a_reference():
    """Alone, the main thread has no peer to wait for: time neither computing nor loading data is sleep."""
    got = speed.judge([{"t1": 446.0, "tn": 1018.0}], 2, None, BANDS | {"max_idle_single": 0.3}, GATE, idle_1=0.55,
                      fast=True)
    assert (got.status, got.key) == (CheckStatus.FAIL, "idle_single") and got.evidence["idle_1"] == 0.55
    assert speed.judge([{"t1": 446.0, "tn": 1018.0}], 2, None, BANDS, GATE, idle_1=0.05, fast=True).key == "fast"
    assert speed.judge(pairs(2.0), 2, REF, BANDS, GATE, idle_1=0.02).key == "pass"


def test_threshold_scales_with_the_number_of_processes():
    assert speed.min_reference_speedup({"min_reference_speedup": 1.3}, 2) == 1.3
    assert speed.min_reference_speedup({"min_reference_efficiency": 0.65}, 4) == pytest.approx(2.6)


def _check(cid, status, points, max_points, key="x"):
    return CheckResult(id=cid, title=text(cid, cid), status=status, points=points, max_points=max_points,
                       message=text("", ""), hint=text("", ""), evidence={"key": key})


def test_points_move_as_the_assignment_says():
    checks = [_check("sampler.disjoint", CheckStatus.PASS, 15, 15), _check("ddp.grad_sync", CheckStatus.WARN, 7.5, 15),
              _check("speedup", CheckStatus.SKIP, 0, 10, key="host_no_gain")]
    moved = speed.move_points(checks, "speedup", {"sampler.disjoint": 5, "ddp.grad_sync": 5})
    by = {c.id: c for c in checks}
    assert (by["speedup"].points, by["speedup"].max_points) == (0, 0)
    assert (by["sampler.disjoint"].points, by["sampler.disjoint"].max_points) == (20, 20)
    assert (by["ddp.grad_sync"].points, by["ddp.grad_sync"].max_points) == (10, 20)  # same fraction
    assert sum(c.max_points for c in checks) == 40 and moved == {"sampler.disjoint": 5, "ddp.grad_sync": 5}
    assert by["speedup"].evidence["points_moved_to"] == {"sampler.disjoint": 5, "ddp.grad_sync": 5}


def test_the_assignment_moves_all_of_the_speed_points():
    scfg = assignments.load("ddp_speedup").raw["checks"]["speedup"]
    assert sum(scfg["not_graded_moves_points_to"].values()) == scfg["points"]
    assert scfg["repeat"]["pairs"] >= 3


# -- re-scoring a grading left "pending calibration", through the real grader code --
def _pending_report(ratio: float) -> dict:
    from coursework.report import GradeReport
    from graders import checks_runner
    from graders.ddp_speedup import grader as ddp_speedup
    from graders.checks.render import render
    a = assignments.load("ddp_speedup")
    cfg = {**a.raw, "_path": str(a.path), "_id": a.id}
    report = GradeReport(assignment=a.id)
    for cid, ccfg in cfg["checks"].items():
        if cid == "speedup":
            ev = {"throughput_1": 1000.0, "throughput_n": 1000.0 * ratio, "nproc": 2, "idle_1_raw": 0.01}
            f = ddp_speedup.speed_finding(cfg, pairs(ratio, ratio * 1.02, ratio * 0.98), None, ev)
        else:
            from graders.checks.ddp import Finding
            f = Finding(CheckStatus.PASS if ccfg["points"] else CheckStatus.INFO, "ok" if ccfg["points"] else "info")
        report.add(checks_runner.render(render, ccfg, cid, f))
    report.summary = ddp_speedup.summary(report, None)
    return report.to_dict()


def test_a_pending_grading_says_so_and_keeps_its_pairs():
    d = _pending_report(1.75)
    check = next(c for c in d["checks"] if c["id"] == "speedup")
    assert check["status"] == "skip" and check["evidence"]["key"] == "pending_calibration"
    assert len(check["evidence"]["pairs"]) == 3 and "pending calibration" in check["message"]["en"]
    assert "pending calibration" in d["summary"]["en"] and d["score"] == 90 and d["max_score"] == 100


def test_rescore_when_the_calibration_lands_without_rerunning():
    from graders.ddp_speedup import grader as ddp_speedup
    a = assignments.load("ddp_speedup")
    graded = ddp_speedup.rescore(_pending_report(1.75), a, {"t1": 1000.0, "tn": 1800.0, "speedup": 1.8, "at": 1.0})
    check = next(c for c in graded["checks"] if c["id"] == "speedup")
    assert (check["status"], check["points"], graded["score"], graded["max_score"]) == ("pass", 10, 100, 100)
    assert "pending" not in graded["summary"]["en"] and graded["rescored"]["reference_at"] == 1.0
    here = ddp_speedup.rescore(_pending_report(0.98), a, {"t1": 1000.0, "tn": 1010.0, "speedup": 1.01, "at": 2.0})
    by = {c["id"]: c for c in here["checks"]}
    assert by["speedup"]["evidence"]["key"] == "host_no_gain" and by["speedup"]["max_points"] == 0
    assert by["sampler.disjoint"]["max_points"] == 20 and here["score"] == here["max_score"] == 100
    assert "not graded on this host" in by["speedup"]["message"]["en"]
    assert ddp_speedup.rescore(here, a, {"t1": 1.0, "tn": 2.0, "speedup": 2.0}) is None  # once only


def _recorded(name):
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "calibration" / f"{name}.json").read_text())


def _speed_cfg():
    return assignments.load("ddp_speedup").raw["checks"]["speedup"]


def test_the_bar_comes_from_the_hosts_spread_a_pcie_gpu_pair_grades_speed():
    """Two GPUs over PCIe reach about 1.5x (CMU 11-868: 1.475-1.531x): under the fixed 1.5x bar the
    reference's own 1.50x could fall short and speed was never graded where it matters. Their pairs
    agree within about 1.5%, so this host's bar is about 1.28x and a correct script is judged."""
    scfg, state = _speed_cfg(), _recorded("gpu_pcie_pair")
    ref = state["accepted"]
    bar = speed.calibration_state.host_bar(scfg["host_gate"], 2, ref, scfg["bands"]["pass"], 3)
    assert bar["basis"] == "spread" and 1.2 < bar["bar"] < 1.35, bar
    got = speed.judge(pairs(1.49, 1.5, 1.52), 2, ref, scfg["bands"], scfg["host_gate"])
    assert got.status == CheckStatus.PASS and got.evidence["min_reference_speedup"] == bar["bar"]
    nothing = speed.judge(pairs(1.0, 1.01, 0.99), 2, ref, scfg["bands"], scfg["host_gate"])
    assert nothing.status != CheckStatus.PASS and nothing.fraction < got.fraction  # told apart from a correct one


def test_a_busy_cpu_hosts_spread_keeps_speed_ungraded():
    scfg, state = _speed_cfg(), _recorded("cpu_busy_2core")
    ref = state["accepted"]
    bar = speed.calibration_state.host_bar(scfg["host_gate"], 2, ref, scfg["bands"]["pass"], 3)
    assert bar["basis"] == "spread" and bar["bar"] >= 1.4, bar  # 11% per pair: a wrong script hides in it
    got = speed.judge(pairs(0.6, 0.62, 0.58), 2, ref, scfg["bands"], scfg["host_gate"])
    assert (got.status, got.key) == (CheckStatus.SKIP, "host_no_gain")
    assert got.evidence["bar_basis"] == "spread" and got.evidence["host_spread"] == bar["spread"]


def test_a_quiet_host_still_needs_a_speedup_the_pass_band_can_see():
    """No noise at all still leaves the pass band: a 1.0x script must stay below 0.8 R, so R > 1.25."""
    ref = {"t1": 1000.0, "tn": 1010.0, "speedup": 1.01, "pairs": pairs(1.01, 1.01, 1.011, 1.009)}
    scfg = _speed_cfg()
    assert speed.calibration_state.host_bar(scfg["host_gate"], 2, ref, 0.8, 3)["bar"] == 1.26
    got = speed.judge(pairs(1.0, 1.0, 1.0), 2, ref, scfg["bands"], scfg["host_gate"])
    assert (got.status, got.key) == (CheckStatus.SKIP, "host_no_gain")


def test_too_few_calibration_pairs_fall_back_to_the_fixed_bar():
    scfg = _speed_cfg()
    ref = {"t1": 1000.0, "tn": 1500.0, "speedup": 1.5, "pairs": pairs(1.5, 1.5)}
    assert speed.calibration_state.host_bar(scfg["host_gate"], 2, ref)["basis"] == "fixed"
    assert speed.calibration_state.host_bar(scfg["host_gate"], 2, None)["bar"] == scfg["host_gate"]["min_reference_speedup"]
