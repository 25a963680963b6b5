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


Text = dict[str, str]  # {"zh": "...", "en": "..."}


def text(zh: str, en: str) -> Text:
    """Build a bilingual text; both languages are mandatory."""
    return {"zh": zh, "en": en}


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

    @property
    def score(self) -> float:
        return round(sum(c.points for c in self.checks), 4)

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
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

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
        )

    @classmethod
    def from_json(cls, s: str) -> "GradeReport":
        return cls.from_dict(json.loads(s))

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
            tests.append({
                "name": f"{c.id}: {c.title.get(lang, c.id)}",
                "score": c.points,
                "max_score": c.max_points,
                "status": "passed" if c.status in (CheckStatus.PASS, CheckStatus.INFO) else "failed",
                "output": "\n".join(x for x in (c.message.get(lang, ""), c.hint.get(lang, "")) if x),
                "visibility": visibility,
            })
        out: dict[str, Any] = {"score": self.score, "tests": tests,
                               "execution_time": self.timings.get("total_s", 0.0)}
        if self.status == ReportStatus.ERROR:
            out["output"] = self.summary.get(lang, "")
        return out
