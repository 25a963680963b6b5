"""Numbers with units: parse "112 GB", "104.3GiB", "0.5 s", "560ms", "1.8x"; grade with tolerance.

GB (10^9) and GiB (2^30) differ by 7 %, more than a typical tolerance, so a student who
computes in GiB but writes "GB" (or the reverse) is told exactly that instead of just "wrong".
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from coursework.quiz.result import FormatError, Text

MAX_NUMERIC_CHARS = 64

UNITS: dict[str, dict[str, tuple[float, str]]] = {
    # dimension -> unit spelling -> (factor to base unit, system); system marks GB vs GiB.
    "bytes": {"b": (1, "-"), "byte": (1, "-"), "bytes": (1, "-"), "字节": (1, "-"),
              "kb": (1e3, "si"), "mb": (1e6, "si"), "gb": (1e9, "si"), "tb": (1e12, "si"),
              "k": (1e3, "si"), "m": (1e6, "si"), "g": (1e9, "si"), "t": (1e12, "si"),
              "kib": (2 ** 10, "iec"), "mib": (2 ** 20, "iec"), "gib": (2 ** 30, "iec"), "tib": (2 ** 40, "iec")},
    "seconds": {"s": (1, "-"), "sec": (1, "-"), "secs": (1, "-"), "second": (1, "-"), "seconds": (1, "-"),
                "秒": (1, "-"), "ms": (1e-3, "-"), "毫秒": (1e-3, "-"), "us": (1e-6, "-"), "µs": (1e-6, "-"),
                "min": (60, "-"), "分钟": (60, "-")},
    "number": {"": (1, "-")},
    "ratio": {"": (1, "-"), "x": (1, "-"), "×": (1, "-"), "倍": (1, "-"), "times": (1, "-")},
    "count": {"": (1, "-"), "samples": (1, "-"), "个": (1, "-"), "张": (1, "-"), "卡": (1, "-"), "张卡": (1, "-"), "cards": (1, "-"), "card": (1, "-"),
              "gpus": (1, "-"), "gpu": (1, "-")},
}

# What a unit of each kind looks like, for hints: a time question never suggests "GB".
EXAMPLES: dict[str, tuple[str, str]] = {
    "bytes": ("112 GB", "GB / GiB"), "seconds": ("2.2 ms", "s / ms / 秒"), "ratio": ("1.8x", "x"),
    "count": ("128", ""), "number": ("0.0004", ""),
}
_UNIT_KIND = {"bytes": ("内存大小", "a memory size"), "seconds": ("时间", "a time"), "ratio": ("倍数", "a ratio"),
              "count": ("个数", "a count"), "number": ("数值", "a number")}

_NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:[.,]\d*)?|\.\d+)(?:e[-+]?\d+)?)\s*([^\d\s].*?)?\s*$", re.I)


@dataclass(frozen=True)
class Quantity:
    """A parsed answer: value in the dimension's base unit, plus how it was written."""

    base_value: float
    number: float
    unit: str
    system: str  # "si", "iec" or "-"


def _err(zh: str, en: str, code: str) -> FormatError:
    return FormatError({"zh": zh, "en": en}, code)


def parse_quantity(raw: str, dimension: str, default_unit: str, require_unit: bool = False) -> Quantity:
    """Parse a number with an optional unit of ``dimension``; raise FormatError if unreadable.

    ``require_unit``: where the unit changes the meaning ("2.2" seconds or milliseconds?), a bare
    number is a format error that names a unit of the right kind; the question is not used up.
    """
    text = (raw or "").strip().replace("，", ",").replace("　", " ")
    if not text:
        raise _err("请输入一个数值。", "Please enter a number.", "empty")
    if len(text) > MAX_NUMERIC_CHARS:
        raise _err("数值答案太长：只需一个数字和单位。", "Too long: enter one number and a unit.", "too_long")
    if re.search(r"\b(nan|inf|infinity)\b", text, re.I):
        raise _err("NaN / 无穷大不是有效数值。", "NaN or infinity is not a valid number.", "nan")
    m = _NUMBER.match(text)
    example, units = EXAMPLES.get(dimension, ("112 GB", ""))
    if not m:
        raise _err(f"无法识别数值，请写成例如 “{example}”。", f"Could not read a number; write e.g. \"{example}\".",
                   "unparseable")
    if require_unit and not (m.group(2) or "").strip():
        kind_zh, kind_en = _UNIT_KIND.get(dimension, ("数值", "a number"))
        raise _err(f"请带上单位：答案是{kind_zh}（{units}），例如 “{example}”。",
                   f"Add a unit: the answer is {kind_en} ({units}), e.g. \"{example}\".", "unit_missing")
    number_text = m.group(1)
    if number_text.count(",") == 1 and "." not in number_text and len(number_text.split(",")[1]) != 3:
        number_text = number_text.replace(",", ".")  # decimal comma, e.g. "0,5"
    number = float(number_text.replace(",", ""))
    if not math.isfinite(number):
        raise _err("数值必须有限。", "The number must be finite.", "nan")
    unit = (m.group(2) or default_unit).strip().lower().rstrip(".")
    table = UNITS[dimension]
    if unit not in table:
        # name the kind of quantity and every spelling that works, Chinese ones included (秒, 毫秒)
        kind_zh, kind_en = _UNIT_KIND.get(dimension, ("数值", "a number"))
        expected = ", ".join(sorted({u for u in table if u}, key=lambda u: (not u.isascii(), u)))
        raise _err(f"单位“{unit}”不适用于本题：答案是{kind_zh}，可用：{expected}。",
                   f"Unit \"{unit}\" does not fit this question: the answer is {kind_en}; use one of: {expected}.",
                   "wrong_unit")
    factor, system = table[unit]
    return Quantity(base_value=number * factor, number=number, unit=unit, system=system)


def within(value: float, target: float, rtol: float, atol: float) -> bool:
    """Relative-or-absolute tolerance test (either one suffices)."""
    return abs(value - target) <= max(atol, rtol * abs(target))


def unit_confusion(q: Quantity, target: float, rtol: float, atol: float) -> Text | None:
    """If the number is right in the *other* byte system (GB vs GiB), say so."""
    if q.system not in ("si", "iec"):
        return None
    si_to_iec = {1e3: 2 ** 10, 1e6: 2 ** 20, 1e9: 2 ** 30, 1e12: 2 ** 40}
    iec_to_si = {v: k for k, v in si_to_iec.items()}
    factor = q.base_value / q.number if q.number else 0
    for table, wrote, meant in ((si_to_iec, "GB", "GiB"), (iec_to_si, "GiB", "GB")):
        for f, other in table.items():
            if math.isclose(factor, f, rel_tol=1e-9) and within(q.number * other, target, rtol, atol):
                return {"zh": f"单位混淆：你写的数值按 {meant} 才对，却标成了 {wrote}（1 GB = 10^9 字节，"
                              f"1 GiB = 2^30 字节，相差约 7%）。",
                        "en": f"Unit confusion: your number is right in {meant} but you labelled it {wrote} "
                              f"(1 GB = 10^9 bytes, 1 GiB = 2^30 bytes, about 7% apart)."}
    return None


def display(value: float, dimension: str, unit: str, exact: bool) -> tuple[str, str]:
    """(zh, en) of a reference value as a person writes it: "about 2.2 ms", "about 112 GB", "128"."""
    if dimension == "seconds":
        unit = "s" if value >= 1 else ("ms" if value >= 1e-3 else "µs")
    factor = UNITS.get(dimension, {}).get(unit.lower(), (1, "-"))[0] if unit else 1
    shown = value / factor
    number = f"{shown:.6g}" if exact else (f"{shown:.2g}" if abs(shown) < 10 else f"{shown:.3g}")
    if "e" in number:
        number = f"{shown:.2f}"
    text = f"{number}×" if unit.lower() in ("x", "×") else f"{number} {unit}".strip()
    return (text, text) if exact else (f"约 {text}", f"about {text}")
