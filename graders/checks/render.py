"""One renderer from a check's ``Finding`` to the report's ``CheckResult``, for every grader.

Points always count against the check's points in ``assignment.json``, so a report is
scored out of the assignment's total whatever happened: a pass earns them, a warning
``warn_fraction`` (or its own fraction), a fail or a skip nothing. A skip is either a
host that cannot run the check (key ``host`` / ``host_*``: "not graded here", the job
belongs on a host that can) or behaviour the grader could not observe; both say so.
Student-supplied values fill messages only as ``str.format`` *arguments*, never as the
format string.
"""
from __future__ import annotations

import re
from typing import Any

from coursework.report import CheckResult, CheckStatus, text

HOST_KEYS = ("host", "host_no_gain", "no_reference")


def not_graded_here(check: CheckResult) -> bool:
    """A check skipped because of this host (no GPU, no usable reference speed), not the student."""
    return check.status == CheckStatus.SKIP and check.evidence.get("key") in HOST_KEYS


def render(ccfg: dict[str, Any], check_id: str, f: Any) -> CheckResult:
    """``ccfg``: the check's entry in ``assignment.json``; ``f``: a ``graders.checks.ddp.Finding``."""
    msgs = ccfg["messages"]
    raw = (msgs.get(f.key) or (msgs.get(f.fallback) if f.fallback else None) or msgs.get(f.status.value)
           or {"zh": f.key, "en": f.key})
    zh, en = _in_language(f.params, "zh"), _in_language(f.params, "en")
    message = _around(text(_fill(raw["zh"], zh), _fill(raw["en"], en)), getattr(f, "lead", None), getattr(f, "tail", None))
    hints = ccfg.get("hints", {})
    hint_raw = hints.get(f.key) or (hints.get(f.fallback) if f.fallback and f.key not in msgs else None)
    hint = text(_fill(hint_raw["zh"], zh), _fill(hint_raw["en"], en)) if hint_raw else text("", "")
    points = float(ccfg.get("points", 0))
    if f.status == CheckStatus.PASS:
        earned = points
    elif f.status in (CheckStatus.SKIP, CheckStatus.INFO, CheckStatus.FAIL, CheckStatus.ERROR):
        earned = 0.0
    elif f.fraction is not None:
        earned = round(points * f.fraction, 2)
    else:  # WARN
        earned = points * float(ccfg.get("warn_fraction", 0.5))
    evidence = {"key": f.key, **f.evidence}
    if f.status == CheckStatus.SKIP and f.key in HOST_KEYS:
        evidence["not_graded_here"] = True
    return CheckResult(id=check_id, title=ccfg["title"], status=f.status, points=earned, max_points=points,
                       message=message, hint=hint, evidence=evidence)


def _around(message: dict[str, str], lead: dict[str, str] | None, tail: dict[str, str] | None) -> dict[str, str]:
    """``message`` with the grader's own ``lead`` before it and ``tail`` after it (zh without a space between)."""
    if not (lead or tail):
        return message
    lead, tail = lead or text("", ""), tail or text("", "")
    return text(lead["zh"] + message["zh"] + tail["zh"],
                " ".join(part for part in (lead["en"], message["en"], tail["en"]) if part))


def _in_language(params: dict[str, Any], lang: str) -> dict[str, Any]:
    """The finding's values for one language: a ``text(zh, en)`` value gives its ``lang`` side."""
    return {k: v[lang] if isinstance(v, dict) and set(v) == {"zh", "en"} else v for k, v in params.items()}


def _fill(template: str, values: dict[str, Any]) -> str:
    """``template.format(**values)``; a value the template needs but the finding lacks shows as "?"."""
    try:
        return template.format_map(_Missing(values))
    except (ValueError, TypeError, IndexError, AttributeError):  # a format spec (":,") that does not fit
        plain = re.sub(r"\{(\w+)(?:![rsa])?(?::[^{}]*)?\}", r"{\1}", template)
        return plain.format_map(_Missing({k: str(v) for k, v in values.items()}))


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "?"
