"""Shared page furniture: template filters for bilingual texts and times, and friendly error pages.

A blueprint with no routes, so every page blueprint can rely on the same filters
without importing each other.
"""
from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from flask import Blueprint, render_template, request
from flask_babel import get_locale
from flask_babel import gettext as _
from flask_wtf.csrf import CSRFError
from markupsafe import Markup
from werkzeug.exceptions import BadRequest

from coursework import text
from server.models import utcnow

bp = Blueprint("ui", __name__)


def lang_key() -> str:
    """``zh`` or ``en``: the key of a report's ``{"zh", "en"}`` texts for the current locale."""
    locale = get_locale()
    return "zh" if locale is not None and locale.language == "zh" else "en"


@bp.app_template_filter("pick")
def pick(value: Any) -> str:
    """The current language's entry of a bilingual dict (falling back to the other one; ``coursework.text.pick``)."""
    return text.pick(value, lang_key())


@bp.app_template_filter("when")
def when(value: datetime | None) -> str:
    """A stored UTC time as ``2026-12-02 13:25 UTC`` (unambiguous for every reader)."""
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "—"


@bp.app_template_filter("duration")
def duration(seconds: float | None) -> str:
    """Seconds as ``1:05`` or ``1:02:05``."""
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


@bp.app_template_filter("approx_duration")
def approx_duration(seconds: float | None) -> str:
    """An estimate for people, rounded up: ``45 s``, ``5 min``, ``2 h 10 min`` (in the page's language)."""
    if seconds is None:
        return "—"
    s = max(0, int(math.ceil(seconds)))
    if s < 60:
        return _("%(n)d s", n=s)
    minutes = int(math.ceil(s / 60))
    if minutes < 60:
        return _("%(n)d min", n=minutes)
    return _("%(h)d h %(m)d min", h=minutes // 60, m=minutes % 60)


@bp.app_template_filter("num")
def num(value: float | None) -> str:
    """A score without trailing zeros, rounded as every page rounds (``coursework.text.score_text``)."""
    return text.score_text(value)


# Reasons the system writes into the audit log (stored in English, shown in the page's language);
# a teacher's typed reason follows a decision's prefix ("accept: ...") and is shown as typed.
def _system_reasons() -> dict[str, str]:
    return {"regrade: the annotation is read again": _("Regrade: the annotation is read again"),
            "annotation review (asked by the student)": _("Annotation review (asked by the student)"),
            "annotation review": _("Annotation review"), "manual grading": _("Manual grading")}


@bp.app_template_filter("audit_reason")
def audit_reason(reason: str | None) -> Markup:
    """An audit entry's reason for people: system reasons translated, typed ones marked as typed."""
    reason = reason or ""
    known = _system_reasons().get(reason)
    if known:
        return Markup.escape(known)
    prefixes = {"accept": _("Accepted"), "reject": _("Rejected")}
    head, sep, rest = reason.partition(": ")
    if sep and head in prefixes:
        return Markup('{}: <span translate="no">{}</span>').format(prefixes[head], rest)
    return Markup('<span translate="no">{}</span>').format(reason)


@bp.app_template_filter("pretty")
def pretty(value: Any) -> str:
    """JSON for people: indented, non-ASCII kept (autoescaping makes it safe in the page)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@bp.app_context_processor
def page_globals() -> dict[str, Any]:
    return {"lang_key": lang_key(), "now": utcnow()}


def _error_page(code: int, message: str):
    if request.blueprint == "api" or request.path.startswith("/api/"):
        return {"error": message}, code
    return render_template("error.html", code=code, message=message), code


@bp.app_errorhandler(404)
def not_found(_exc):
    return _error_page(404, _("There is nothing here, or it is not yours to see."))


@bp.app_errorhandler(413)
def too_large(_exc):
    """An upload over the whole-request limit (a homework page answers its own: ``homework.views``)."""
    return _error_page(413, _("The upload is larger than the server accepts. Nothing was stored."))


@bp.app_errorhandler(400)
def bad_request(exc):
    """A refused form (CSRF token missing or expired) or another bad request, said plainly."""
    if isinstance(exc, CSRFError) or exc.description == BadRequest.description:
        return _error_page(400, _("The form could not be accepted (it may have expired). "
                                  "Reload the page and try again."))
    return _error_page(400, exc.description)  # a view's own abort(400, "...") keeps its words
