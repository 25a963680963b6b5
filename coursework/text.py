"""Bilingual text: every user-facing string is a ``{"zh": ..., "en": ...}`` pair."""
from __future__ import annotations

from typing import Any

Text = dict[str, str]  # {"zh": "...", "en": "..."}


def text(zh: str, en: str) -> Text:
    """Build a bilingual text; both languages are mandatory."""
    return {"zh": zh, "en": en}


def pick(value: Any, lang: str, default: str = "") -> str:
    """``value``'s entry for ``lang``, else the English one, else the Chinese one, else ``default``.

    ``value`` may be a bilingual dict, a plain string (returned as is) or None (``default``); an
    entry that is empty counts as missing, so a half-translated text still shows something.
    """
    if isinstance(value, dict):
        return value.get(lang) or value.get("en") or value.get("zh") or default
    return default if value is None else str(value)


SCORE_DECIMALS = 2  # scores are stored to 4 places; people read 2, everywhere (gradebook means are 2 too)


def score_text(value: float | None) -> str:
    """A score as every page shows it: at most two decimals, no trailing zeros (``7.5``, ``11.58``,
    ``10``); ``—`` for none. The one rounding rule of the pages, so a cell and a mean agree."""
    if value is None:
        return "—"
    shown = round(float(value), SCORE_DECIMALS)
    return f"{shown + 0.0:g}"  # + 0.0: no "-0"
