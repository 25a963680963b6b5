"""Checks never crash the grade: each check call and each rendering runs isolated.

``isolated(module)`` wraps a checks module (``graders.checks.ddp``): a function that raises
returns an ``error`` finding instead, with the traceback for staff. ``render`` does the same
for turning a finding into a ``CheckResult`` (message templates filled with student values).
The tracebacks travel in the evidence under ``STAFF_KEY`` until ``move_tracebacks`` (called
for every report by ``graders.integrity.finalize``) moves them to ``staff_traceback``, so a
student never sees them. The other checks are graded; the submission counts as an attempt.
"""
from __future__ import annotations

import functools
import traceback
import types
from typing import Any

from coursework.report import CheckResult, CheckStatus, GradeReport, text

STAFF_KEY = "_staff_traceback"
MAX_TRACEBACK = 6000
ERROR_MESSAGE = text("这项检查在评分时出错，已通知助教；其他检查照常评分。",
                     "This check failed inside the grader; staff have been notified. The other checks are graded as usual.")


def _tb() -> str:
    return traceback.format_exc()[-MAX_TRACEBACK:]


class _Isolated:
    """A checks module whose functions return an error finding instead of raising."""

    def __init__(self, module: types.ModuleType):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not isinstance(value, types.FunctionType):
            return value
        finding_cls = getattr(self._module, "Finding")

        @functools.wraps(value)
        def call(*args, **kwargs):
            try:
                return value(*args, **kwargs)
            except Exception:
                return finding_cls(CheckStatus.ERROR, "error", {}, {STAFF_KEY: _tb(), "function": name})
        return call


def run_check(fn, *args, finding_cls=None, **kwargs):
    """``fn(*args, **kwargs)``, or an ``error`` finding (traceback for staff) if it raises.

    For a grader that calls registered check functions itself (``CHECKS[check_id](ctx)``).
    """
    try:
        return fn(*args, **kwargs)
    except Exception:
        if finding_cls is None:
            from graders.checks.ddp import Finding as finding_cls
        return finding_cls(CheckStatus.ERROR, "error", {}, {STAFF_KEY: _tb(), "function": getattr(fn, "__name__", "?")})


def isolated(module: types.ModuleType) -> Any:
    """``module`` with each function call isolated (see the module docstring)."""
    return _Isolated(module)


def render(fn, ccfg: dict, check_id: str, finding) -> CheckResult:
    """``fn(ccfg, check_id, finding)`` (a grader's finding renderer), or an error result if it raises."""
    try:
        if getattr(finding, "status", None) == CheckStatus.ERROR and getattr(finding, "key", "") == "error":
            raise _CheckError(finding.evidence.get(STAFF_KEY, ""))
        return fn(ccfg, check_id, finding)
    except Exception as exc:
        tb = exc.staff if isinstance(exc, _CheckError) else _tb()
        title = ccfg.get("title") if isinstance(ccfg, dict) and isinstance(ccfg.get("title"), dict) else None
        try:
            points = float(ccfg.get("points", 0)) if isinstance(ccfg, dict) else 0.0
        except (TypeError, ValueError):
            points = 0.0
        return CheckResult(id=check_id, title=title or text(check_id, check_id), status=CheckStatus.ERROR,
                           points=0.0, max_points=points, message=dict(ERROR_MESSAGE),
                           evidence={"key": "error", STAFF_KEY: tb})


class _CheckError(Exception):
    def __init__(self, staff: str):
        super().__init__("check raised")
        self.staff = staff


def move_tracebacks(report: GradeReport) -> None:
    """Take check tracebacks out of the evidence (students see evidence) into ``staff_traceback``."""
    parts = []
    for c in report.checks:
        tb = c.evidence.pop(STAFF_KEY, None) if isinstance(c.evidence, dict) else None
        if tb:
            parts.append(f"[check {c.id}]\n{tb}")
    if parts:
        report.staff_traceback = "\n".join(filter(None, [report.staff_traceback, *parts]))[-4 * MAX_TRACEBACK:]
