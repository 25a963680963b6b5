"""``pick``: the one place that chooses a language, with its fallbacks."""
from __future__ import annotations

import pytest

from coursework.text import pick, text


@pytest.mark.parametrize("value, lang, expected", [
    (text("二", "two"), "zh", "二"),
    (text("二", "two"), "en", "two"),
    ({"zh": "", "en": "two"}, "zh", "two"),  # half-translated: the other language, not a blank
    ({"zh": "二"}, "en", "二"),
    ({"en": "two"}, "fr", "two"),  # a language without texts: English first
    ({}, "zh", ""),
    (None, "en", ""),
    ("plain", "zh", "plain"),
    (3, "en", "3"),
])
def test_pick_falls_back_to_the_other_language(value, lang, expected) -> None:
    assert pick(value, lang) == expected


def test_pick_default_when_nothing_is_there() -> None:
    assert pick({"zh": "", "en": ""}, "en", default="speedup.ratio") == "speedup.ratio"
    assert pick(None, "zh", default="-") == "-"
