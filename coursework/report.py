"""The one result model that crosses every process boundary as JSON.

A ``GradeReport`` is produced by a grader (``python -m graders grade ... --json``),
stored by the worker beside indexed score columns, and rendered by the web app.
Every user-facing text is a ``{"zh": ..., "en": ...}`` pair so the same report
serves both languages.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from coursework.text import Text, text


class CheckStatus(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    ERROR = "error"
    SKIP = "skip"
    INFO = "info"


class ReportStatus(str, Enum):
    """Overall outcome. ``ERROR`` means the grader itself broke: staff are notified
    and the attempt is not counted."""

    GRADED = "graded"
    ERROR = "error"
    NEEDS_REVIEW = "needs_review"  # integrity events: 0 points until an instructor accepts or rejects


MAX_REPORT_BYTES = 256 * 1024  # the stored report; logs and evidence are cut to fit
REVIEW_SUMMARY = {
    "zh": "本次提交需要助教复核，复核前计 0 分。复核后会在此显示结果；如有疑问请联系助教。",
    "en": "This submission needs a review by the teaching staff and counts 0 points until then. "
          "The outcome will show here; ask the staff if you have questions.",
}


@dataclass
class CheckResult:
    """One check of a grader, identified by a stable dotted id (``sampler.disjoint``)."""

    id: str
    title: Text
    status: CheckStatus
    points: float = 0.0
    max_points: float = 0.0
    message: Text = field(default_factory=lambda: text("", ""))
    hint: Text = field(default_factory=lambda: text("", ""))
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CheckResult":
        return cls(
            id=d["id"],
            title=d.get("title") or text(d["id"], d["id"]),
            status=CheckStatus(d["status"]),
            points=float(d.get("points", 0.0)),
            max_points=float(d.get("max_points", 0.0)),
            message=d.get("message") or text("", ""),
            hint=d.get("hint") or text("", ""),
            evidence=d.get("evidence") or {},
        )


@dataclass
class GradeReport:
    """The result of grading one submission."""

    assignment: str
    submission: str | None = None
    mode: str = "cpu"
    status: ReportStatus = ReportStatus.GRADED
    checks: list[CheckResult] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)  # "rank0" -> truncated tail
    timings: dict[str, float] = field(default_factory=dict)
    sandbox: dict[str, Any] = field(default_factory=dict)  # layers in force
    plots: dict[str, Any] = field(default_factory=dict)  # data series for the report page
    summary: Text = field(default_factory=lambda: text("", ""))
    staff_traceback: str | None = None  # only shown to instructors
    # staff only: {"events": [...], "computed_score": x, "computed_summary": {...}}; see graders.integrity
    integrity: dict[str, Any] = field(default_factory=dict)

    @property
    def computed_score(self) -> float:
        """The sum of the checks' points, whatever the integrity status."""
        return round(sum(c.points for c in self.checks), 4)

    @property
    def score(self) -> float:
        """What counts: 0 while the grading awaits an integrity review."""
        return 0.0 if self.status == ReportStatus.NEEDS_REVIEW else self.computed_score

    @property
    def max_score(self) -> float:
        return round(sum(c.max_points for c in self.checks), 4)

    def check(self, check_id: str) -> CheckResult | None:
        """Return the check with this id, or None."""
        return next((c for c in self.checks if c.id == check_id), None)

    def add(self, result: CheckResult) -> CheckResult:
        self.checks.append(result)
        return result

    def to_dict(self) -> dict[str, Any]:
        return {
            "assignment": self.assignment,
            "submission": self.submission,
            "mode": self.mode,
            "status": self.status.value,
            "score": self.score,
            "max_score": self.max_score,
            "checks": [c.to_dict() for c in self.checks],
            "logs": self.logs,
            "timings": self.timings,
            "sandbox": self.sandbox,
            "plots": self.plots,
            "summary": self.summary,
            "staff_traceback": self.staff_traceback,
            "integrity": self.integrity,
        }

    def to_json(self) -> str:
        """The report as one JSON line of at most ``MAX_REPORT_BYTES`` (see ``capped``)."""
        return json.dumps(capped(self.to_dict()), ensure_ascii=False, sort_keys=True)

    def mark_for_review(self, events: list[dict[str, Any]]) -> None:
        """Integrity events: status ``needs_review`` and 0 points; the computed grade is kept for staff."""
        if self.status == ReportStatus.ERROR:
            return  # a grader crash is not counted anyway; staff see the traceback
        if self.status != ReportStatus.NEEDS_REVIEW:
            self.integrity = {"events": [], "computed_score": self.computed_score,
                              "computed_summary": dict(self.summary)}
        self.integrity["events"] = (self.integrity.get("events", []) + list(events))[:80]
        self.status = ReportStatus.NEEDS_REVIEW
        self.summary = dict(REVIEW_SUMMARY)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GradeReport":
        return cls(
            assignment=d["assignment"],
            submission=d.get("submission"),
            mode=d.get("mode", "cpu"),
            status=ReportStatus(d.get("status", "graded")),
            checks=[CheckResult.from_dict(c) for c in d.get("checks", [])],
            logs=d.get("logs") or {},
            timings=d.get("timings") or {},
            sandbox=d.get("sandbox") or {},
            plots=d.get("plots") or {},
            summary=d.get("summary") or text("", ""),
            staff_traceback=d.get("staff_traceback"),
            integrity=d.get("integrity") or {},
        )

    @classmethod
    def crashed(cls, assignment: str, traceback_text: str, mode: str = "cpu") -> "GradeReport":
        """A report for a grader that raised: students see 'grading failed, staff
        notified', instructors see the traceback."""
        return cls(
            assignment=assignment,
            mode=mode,
            status=ReportStatus.ERROR,
            summary=text("评分失败，已通知助教。本次提交不计入次数。",
                         "Grading failed, staff notified. This attempt is not counted."),
            staff_traceback=traceback_text,
        )

    def to_gradescope(self, lang: str = "en") -> dict[str, Any]:
        """Export in Gradescope's autograder ``results.json`` format."""
        visibility = "visible"
        tests = []
        for c in self.checks:
            test = {
                "name": f"{c.id}: {c.title.get(lang, c.id)}",
                "score": c.points,
                "max_score": c.max_points,
                "output": "\n".join(x for x in (c.message.get(lang, ""), c.hint.get(lang, "")) if x),
                "visibility": visibility,
            }
            status = gradescope_status(c)
            if status:
                test["status"] = status
            tests.append(test)
        out: dict[str, Any] = {"score": self.score, "tests": tests,
                               "execution_time": self.timings.get("total_s", 0.0)}
        if self.status == ReportStatus.ERROR:
            out["output"] = self.summary.get(lang, "")
        return out


def gradescope_status(c: CheckResult) -> str | None:
    """A check's Gradescope test status: a warning passed (its points say what it cost), a failure
    or an error failed; a skipped check, or a manual cell waiting for the teacher, has none (the
    test shows neutral: nothing was judged yet)."""
    if c.status in (CheckStatus.PASS, CheckStatus.INFO, CheckStatus.WARN):
        return "passed"
    if c.status in (CheckStatus.FAIL, CheckStatus.ERROR):
        return "failed"
    return None


def merge_manual_scores(report: dict[str, Any], scores: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A copy of a stored report (``GradeReport.to_dict()``) with the instructor's manual scores.

    ``scores`` maps a manual cell id to ``{"score": float, "comment": str}``. Pure: the same
    numbers go to nbgrader's gradebook (``Grade.manual_score``) so both totals agree. A
    ``field.<path>`` id is a teacher's decision on an annotation that waited for review, or, with
    ``"asked": True``, on one a student asked about (it replaces the automatic points).
    Raises ValueError for an unknown cell or a score outside 0..max."""
    out = json.loads(json.dumps(report))
    checks = {c["id"]: c for c in out["checks"]}
    for cell_id, s in scores.items():
        if cell_id.startswith("field."):
            _merge_field_decision(checks.get(cell_id), cell_id, s, out.get("assignment", ""))
            continue
        c = checks.get(f"manual.{cell_id}")
        if c is None:
            raise ValueError(f"no manual cell {cell_id!r} in this report")
        score = float(s["score"])
        if not 0 <= score <= c["max_points"]:
            raise ValueError(f"{cell_id}: score {score} outside 0..{c['max_points']}")
        comment = str(s.get("comment", ""))
        c["points"], c["status"] = score, (CheckStatus.PASS if score >= c["max_points"] else CheckStatus.FAIL).value
        c["message"] = text(f"老师评分：{score:g}/{c['max_points']:g}。{comment}".strip(),
                            f"Instructor's score: {score:g}/{c['max_points']:g}. {comment}".strip())
        c["evidence"] = {**c.get("evidence", {}), "manual_score": score}
    _settle_waiting(out, checks)
    out["score"] = round(sum(c["points"] for c in out["checks"]), 4)
    return out


def waiting_verdict(messages: dict[str, Text], points: float, max_points: float, waiting: dict[str, float],
                    decided: dict[str, float]) -> tuple[CheckStatus, Text]:
    """Status and message of a check whose points partly wait for a teacher's decisions on some
    ``field.<path>`` checks (homework 2's notebook part C; ``messages`` are its spec's).

    ``waiting`` maps each still open field to what it may add, ``decided`` each decided one to
    what the teacher gave (already in ``points``). Waiting alone is never a failure: WARN while
    the open fields could make up the rest, FAIL when something else is wrong."""
    def paths(ids: Any) -> str:
        return ", ".join(f"`{i.removeprefix('field.')}`" for i in ids)

    score, top = f"{points:g}", f"{max_points:g}"
    if waiting:
        pending = round(sum(waiting.values()), 2)
        note = {lang: messages["waiting_note"][lang].format(fields=paths(waiting), pending=f"{pending:g}")
                for lang in ("zh", "en")}
        key = "waiting" if points + pending >= max_points - 0.02 else "partial"
        return (CheckStatus.WARN if key == "waiting" else CheckStatus.FAIL,
                {lang: messages[key][lang].format(score=score, max=top, detail=note[lang], note=note[lang])
                 for lang in ("zh", "en")})
    status = CheckStatus.PASS if points >= max_points - 0.02 else CheckStatus.FAIL
    given = f"{round(sum(decided.values()), 2):g}"
    return status, {lang: messages["reviewed"][lang].format(score=score, max=top, decided=given, fields=paths(decided))
                    for lang in ("zh", "en")}


def _settle_waiting(out: dict[str, Any], checks: dict[str, dict[str, Any]]) -> None:
    """Move the teacher's points for decided fields onto the check that counts them (the field
    checks say ``counted_in`` it) and restate that check: a field that waited (in its
    ``evidence.waiting``) adds the decision; a field the student asked about replaces its share."""
    from coursework.assignments import load

    asked: dict[str, dict[str, float]] = {}  # counting check -> field -> decision minus the share it had
    for fid, f in checks.items():
        ev = f.get("evidence") or {}
        if ev.get("counted_in") and ev.get("asked") and ev.get("review") == "decided":
            asked.setdefault(ev["counted_in"], {})[fid] = f["points"] - float(ev.get("auto_points") or 0.0)
    for c in out["checks"]:
        waiting = (c.get("evidence") or {}).get("waiting")
        waiting = waiting if isinstance(waiting, dict) else {}
        decided = {fid: checks[fid]["points"] for fid in waiting
                   if (checks.get(fid) or {}).get("evidence", {}).get("review") == "decided"}
        replaced = asked.get(c["id"], {})
        if not decided and not replaced:
            continue
        for fid in [*decided, *replaced]:
            checks[fid]["points"] = 0.0  # counted once, on the check that holds the part's points
        # not clamped: the gradebook adds the same differences to the stored score
        c["points"] = round(c["points"] + sum(decided.values()) + sum(replaced.values()), 2)
        decided |= {fid: checks[fid]["evidence"]["manual_score"] for fid in replaced}
        messages = load(out.get("assignment", "")).raw["checks"][c["id"].split(".")[0]]["messages"]
        open_ = {fid: pts for fid, pts in waiting.items() if fid not in decided}
        status, c["message"] = waiting_verdict(messages, c["points"], c["max_points"], open_, decided)
        c["status"] = status.value
        c["evidence"] = {**c["evidence"], "waiting": open_, "decided": decided}


def askable_field(c: dict[str, Any]) -> bool:
    """Whether a student may ask a teacher about this check ("I think this is right"): an
    auto-graded annotation field, not one waiting for or already given a teacher's decision,
    with points at stake: its own (upload route) or its share of the check it is counted in
    (notebook route, ``counted_in`` part C with ``counted_max``; none when part C counted nothing)."""
    ev = c.get("evidence") or {}
    at_stake = float(ev.get("counted_max") or 0) if ev.get("counted_in") else float(c.get("max_points") or 0)
    return str(c.get("id", "")).startswith("field.") and "verdict" in ev and not ev.get("review") and at_stake > 0


def field_stake(c: dict[str, Any]) -> tuple[float, float]:
    """(automatic points, maximum) of an annotation field where they count: its own, or its share
    of the check it is counted in (notebook part C)."""
    ev = c.get("evidence") or {}
    if ev.get("counted_in"):
        return float(ev.get("counted_points") or 0.0), float(ev.get("counted_max") or 0.0)
    return float(c.get("points") or 0.0), float(c.get("max_points") or 0.0)


def _merge_field_decision(c: dict[str, Any] | None, check_id: str, s: dict[str, Any], assignment_id: str) -> None:
    """A teacher's points for an annotation: one held for review (0..its ``review_points``, on the
    report's scale), or one a student asked about (``s["asked"]``: 0..the field's max, REPLACING
    its automatic points). The check carries them and says who decided (the ``decided`` text)."""
    from coursework.assignments import load

    ev = (c or {}).get("evidence") or {}
    asked = bool(s.get("asked"))
    if c is None or not (ev.get("review") == "pending" if not asked else askable_field(c)):
        raise ValueError(f"{check_id} is not waiting for review in this report")
    auto, top = field_stake(c) if asked else (0.0, float(ev["review_points"]))
    score = float(s["score"])
    if not 0 <= score <= top:
        raise ValueError(f"{check_id}: score {score} outside 0..{top}")
    tpl = load(assignment_id).raw["checks"]["field"]["messages"]["decided"]
    comment = str(s.get("comment", ""))
    c["points"] = score
    c["status"] = (CheckStatus.PASS if score >= top - 1e-9 else CheckStatus.FAIL).value
    c["message"] = {lang: tpl[lang].format(score=f"{score:g}", max=f"{top:g}", comment=comment).strip()
                    for lang in ("zh", "en")}
    c["evidence"] = {**ev, "review": "decided", "manual_score": score}
    if asked:  # replaced, not added: the gradebook subtracts the automatic points the same way
        c["evidence"].update(asked=True, auto_points=auto)


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, sort_keys=True).encode())


def _cut(value: Any, limit: int) -> Any:
    """``value`` rendered in at most about ``limit`` bytes of JSON (a note says it was cut)."""
    if _json_size(value) <= limit:
        return value
    s = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return {"truncated": True, "bytes": len(s.encode()), "head": s[:max(0, limit // 4)]}


def capped(d: dict[str, Any], limit: int = MAX_REPORT_BYTES) -> dict[str, Any]:
    """The report dict within ``limit`` bytes: logs, then evidence, then plots, then texts are cut.

    Student output reaches the report through logs and evidence; whatever they hold, the stored
    report stays small, and ``truncated`` lists what was shortened.
    """
    if _json_size(d) <= limit:
        return d
    d = dict(d)
    cut: list[str] = []
    logs = dict(d.get("logs") or {})
    if logs:
        share = max(1024, limit // 8 // len(logs))
        d["logs"] = {k: (v[-share:] if isinstance(v, str) else "") for k, v in list(logs.items())[:16]}
        cut.append("logs")
    if _json_size(d) > limit:
        checks = []
        share = max(2048, limit // 4 // max(1, len(d.get("checks") or [])))
        for c in d.get("checks") or []:
            c = dict(c)
            c["evidence"] = _cut(c.get("evidence") or {}, share)
            for k in ("message", "hint", "title"):
                if isinstance(c.get(k), dict):
                    c[k] = {lang: str(t)[:2000] for lang, t in c[k].items()}
            checks.append(c)
        d["checks"] = checks
        cut.append("evidence")
    for key, share in (("plots", limit // 8), ("sandbox", 8192), ("timings", 4096), ("staff_traceback", limit // 8),
                       ("integrity", 0)):
        if _json_size(d) <= limit:
            break
        if key == "staff_traceback" and isinstance(d.get(key), str):
            d[key] = d[key][-share:]
        elif key == "integrity" and isinstance(d.get(key), dict):  # keep the computed grade, cut the event list
            events = d[key].get("events") or []
            d[key] = {**d[key], "events": events[:16], "events_cut": len(events)}
        elif d.get(key):
            d[key] = _cut(d[key], share)
        cut.append(key)
    if _json_size(d) > limit:  # pathological: keep only the scored skeleton
        d["logs"], d["plots"] = {}, {}
        d["checks"] = [{**c, "evidence": {}} for c in d.get("checks") or []][:200]
        cut.append("all")
    d["truncated"] = cut
    return d
