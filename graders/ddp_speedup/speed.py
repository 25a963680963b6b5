"""Speed judged only where it means something, from repeated interleaved runs.

Three decisions, all pure:

* **Can this host judge speed?** Only if the reference solution, calibrated here, shows a real
  speedup with N processes: at least the bar ``calibration_state.host_bar`` derives from this host's
  own noise (the spread of the calibration's pair ratios: a quiet GPU pair needs about 1.28x, a
  busy 2-core CPU about 1.5x), or, before a calibration with enough pairs, the fixed
  ``min_reference_speedup`` of the check's ``host_gate`` in ``assignment.json``. Below it a correct script and a
  wrong one are not apart by more than the host's noise (a 2-core host: reference 1.01x, and a
  correct script got 5/10 while one without a DistributedSampler got 9.15/10), so speed is "not
  graded on this host" and its points go where the assignment says (``move_points``). No accepted
  calibration yet: "pending calibration", with the pairs kept so it can be re-scored later
  without running the student's code again.
* **The measured speedup** is the median of paired ratios: each pair is a 1-process run and an
  N-process run back to back, its ratio ``tn / t1``; the median over pairs (as CMU 11-868 grades
  its DDP speedups) is not moved by one pair that ran beside someone else's job. It is the ratio
  of one pair, the middle one (the lower middle of an even count), and that pair's throughputs
  are the ones every page shows beside it, so "0.80x (1897 -> 1518 samples/s)" adds up.
* **The score** never falls as the speedup rises: below ``min_raw`` (1.0x: N processes no faster
  than one) nothing; above, the band of ``raw / reference`` capped at 1. The two guards against a
  held-back 1-process run (``superlinear``, ``slow_single``, ``idle_single``) judge other
  quantities and give 0.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from coursework import calibration_state
from coursework.report import CheckResult, CheckStatus, text

NOT_GRADED_KEYS = ("host_no_gain", "pending_calibration")


@dataclass
class Verdict:
    """The speed check's status, message key, message parameters, evidence and fraction of its points."""

    status: CheckStatus
    key: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fraction: float | None = None


def paired(pairs: list[dict[str, float]]) -> dict[str, Any]:
    """The middle pair by its own ratio ``tn / t1`` (the lower middle of an even count): its ratio
    is the speedup and its ``t1``, ``tn`` the throughputs shown beside it; ``ratios`` lists all."""
    ratios = [p["tn"] / p["t1"] for p in pairs]
    middle = sorted(range(len(pairs)), key=lambda i: ratios[i])[(len(pairs) - 1) // 2]
    return {"speedup": ratios[middle], "t1": pairs[middle]["t1"], "tn": pairs[middle]["tn"],
            "ratios": [round(r, 3) for r in ratios]}


min_reference_speedup = calibration_state.min_reference_speedup  # shared with the web app's calibration page


def band(normalised: float, bands: dict[str, float]) -> tuple[CheckStatus, float, str]:
    """Status, fraction of points and band name of a normalised speedup (raw over the reference's, <= 1)."""
    if normalised >= bands["pass"]:
        return CheckStatus.PASS, 1.0, "pass"
    if normalised >= bands["fail_below"]:
        span = bands["pass"] - bands["fail_below"]
        return CheckStatus.WARN, round((normalised - bands["fail_below"]) / span, 3), "partial"
    return CheckStatus.FAIL, 0.0, "fail"


def judge(pairs: list[dict[str, float]], nproc: int, ref: dict[str, Any] | None, bands: dict[str, float],
          gate: dict[str, Any], idle_1: float | None = None, fast: bool = False) -> Verdict:
    """The speed verdict from the student's ``pairs`` (samples/s with 1 and ``nproc`` processes).

    ``ref``: the calibrated reference ``{"t1", "tn", "speedup"}`` on this host, None while there is
    none. ``idle_1``: the 1-process run's unexplained idle fraction (CPU only). ``fast``: the samples'
    short runs, where only the guards that need no reference are judged. See the module docstring.
    """
    got = paired(pairs)
    raw = got["speedup"]
    ev: dict[str, Any] = {"raw": round(raw, 3), "ratios": got["ratios"], "pairs": pairs,
                          "t1": round(got["t1"], 2), "tn": round(got["tn"], 2)}
    if raw > nproc * float(bands.get("max_efficiency", 1.25)):
        return Verdict(CheckStatus.FAIL, "superlinear", ev, 0.0)
    if idle_1 is not None:
        ev["idle_1"] = round(idle_1, 3)
        if idle_1 > float(bands.get("max_idle_single", 0.3)):
            return Verdict(CheckStatus.FAIL, "idle_single", ev, 0.0)
    if fast:
        return Verdict(CheckStatus.SKIP, "fast", ev)
    if not ref:
        return Verdict(CheckStatus.SKIP, "pending_calibration", ev)
    bar = calibration_state.host_bar(gate, nproc, ref, float(bands.get("pass", 0.8)), len(pairs))
    threshold = bar["bar"]
    ev.update(reference=round(ref["speedup"], 3), ref_t1=round(ref["t1"], 2), ref_tn=round(ref["tn"], 2),
              ratio_1=round(got["t1"] / ref["t1"], 3), ratio_n=round(got["tn"] / ref["tn"], 3),
              min_reference_speedup=threshold, bar_basis=bar["basis"], host_spread=bar["spread"])
    if ref["speedup"] < threshold:
        return Verdict(CheckStatus.SKIP, "host_no_gain", ev)
    if ev["ratio_1"] < float(bands.get("single_ratio", 0.6)) * ev["ratio_n"]:
        return Verdict(CheckStatus.FAIL, "slow_single", ev, 0.0)
    ev["normalised_uncapped"] = round(raw / ref["speedup"], 3)
    ev["normalised"] = round(min(raw / ref["speedup"], 1.0), 3)
    if raw < float(bands.get("min_raw", 1.0)):
        return Verdict(CheckStatus.FAIL, "below_one", ev, 0.0)
    status, fraction, name = band(ev["normalised"], bands)
    return Verdict(status, name, ev, fraction)


def move_points(checks: list[CheckResult], from_id: str, moves: dict[str, float]) -> dict[str, float]:
    """Move ``from_id``'s points to the checks named in ``moves`` (id -> points), in place.

    Each receiving check keeps its fraction: 7.5 of 15 with 5 moved in becomes 10 of 20. The
    report stays out of the assignment's total. Returns what was moved (checks that are absent
    receive nothing, and what they would have received stays with ``from_id``).
    """
    by_id = {c.id: c for c in checks}
    source = by_id.get(from_id)
    if source is None:
        return {}
    moved: dict[str, float] = {}
    for cid, pts in moves.items():
        target = by_id.get(cid)
        if target is None or cid == from_id or pts <= 0:
            continue
        share = target.points / target.max_points if target.max_points else (
            1.0 if target.status == CheckStatus.PASS else 0.0)
        target.max_points = round(target.max_points + pts, 4)
        target.points = round(share * target.max_points, 4)
        moved[cid] = pts
    source.max_points = round(max(0.0, source.max_points - sum(moved.values())), 4)
    source.points = 0.0
    source.evidence["points_moved_to"] = moved
    return moved


def message_params(v: Verdict, nproc: int, scfg: dict[str, Any]) -> dict[str, Any]:
    """The values the speed check's messages in ``assignment.json`` may name."""
    ev, bands = v.evidence, scfg["bands"]
    k = len(ev["pairs"])
    params: dict[str, Any] = {"raw": f"{ev['raw']:.2f}", "t1": f"{ev['t1']:.0f}", "tn": f"{ev['tn']:.0f}", "n": nproc,
                              "k": k, "ratios": text("、".join(f"{r:.2f}" for r in ev["ratios"]),
                                                     ", ".join(f"{r:.2f}" for r in ev["ratios"])),
                              "pairs": text("", "") if k < 2 else text(
                                  f"（{k} 组 1 进程与 {nproc} 进程先后运行的配对，取比值居中的一组；各组比值："
                                  + "、".join(f"{r:.2f}" for r in ev["ratios"]) + "）",
                                  f" (the middle of {k} pairs, each a 1-process run then a {nproc}-process run back to "
                                  "back; their ratios: " + ", ".join(f"{r:.2f}" for r in ev["ratios"]) + ")"),
                              "expect": scfg["chapter_expectation"],
                              "max": f"{nproc * float(bands.get('max_efficiency', 1.25)):.2f}",
                              "min_raw": f"{float(bands.get('min_raw', 1.0)):.1f}"}
    if "idle_1" in ev:
        params.update(idle1=f"{100 * ev['idle_1']:.0f}%", max_idle=f"{100 * float(bands.get('max_idle_single', 0.3)):.0f}%")
    if "reference" in ev:
        params.update(ref=f"{ev['reference']:.2f}", ref_t1=f"{ev['ref_t1']:.0f}", ref_tn=f"{ev['ref_tn']:.0f}",
                      r1=f"{ev['ratio_1']:.2f}", rn=f"{ev['ratio_n']:.2f}", norm=f"{ev.get('normalised', 0):.2f}",
                      min_ref=f"{ev['min_reference_speedup']:.2f}")
    moves = scfg.get("not_graded_moves_points_to", {})
    params["moved"] = {"zh": "、".join(f"{cid}（+{pts:g}）" for cid, pts in moves.items()) or "无",
                       "en": ", ".join(f"{cid} (+{pts:g})" for cid, pts in moves.items()) or "nowhere"}
    return params


def settle_points(checks: list[CheckResult], scfg: dict[str, Any]) -> dict[str, float]:
    """Where this host cannot judge speed, move the speed check's points as ``assignment.json`` says."""
    check = next((c for c in checks if c.id == "speedup"), None)
    if check is None or check.status != CheckStatus.SKIP or check.evidence.get("key") != "host_no_gain":
        return {}
    return move_points(checks, "speedup", scfg.get("not_graded_moves_points_to", {}))


def summary_note(report: Any, zh: str, en: str) -> tuple[str, str]:
    """The summary's sentence about speed when it was not graded on this host or is pending."""
    check = report.check("speedup") if hasattr(report, "check") else None
    key = check.evidence.get("key") if check else None
    if key == "host_no_gain":
        zh += "本机无法评判速度（参考解在本机几乎没有加速），速度的分数已按作业规定计入其他检查项。"
        en += (" Speed is not graded on this host (even the reference solution barely speeds up here); its points "
               "count toward other checks as the assignment says.")
    elif key == "pending_calibration":
        zh += "速度待本机校准后评分：校准完成后会自动重新计算这一项，不会重新运行你的代码。"
        en += (" Speed is pending calibration of this host: it is scored automatically once the calibration lands, "
               "without running your code again.")
    return zh, en
