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
