"""A report as a student can read it: evidence as labelled values with units, check titles instead
of check ids, timings with names, launcher frames and host paths out of the logs, and a syntax
error as "line 2: invalid syntax" with the caret.

Everything here is a pure function of the stored report (student code produced much of it, so
every value is bounded, escaped by the template, and never used as a format string). Graders add
evidence keys over time: a key this module does not know still gets a readable rendering from
its name (``peak_bytes`` -> bytes, ``wall_s`` -> seconds, ``*_at`` / Unix times -> a date), and
keys that only mean something to staff (digests, hashes, calibration internals) are hidden from
students.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from coursework.text import pick
from server.homework.evidence_labels import (HELD_READING_KEYS, LABELS, STAFF_ONLY, STAFF_PATTERN, VALUES, generic_label,
                                             value_label)

MAX_ITEMS, MAX_TEXT, MAX_DEPTH = 16, 300, 2

# the labels, staff-only keys and value names live in evidence_labels (data, tested against the graders)
_STAFF_PATTERN = STAFF_PATTERN
UNITS = {"zh": {"s": "秒", "sps": "样本/秒", "yes": "是", "no": "否", "more": "另有 {n} 项"},
         "en": {"s": "s", "sps": "samples/s", "yes": "yes", "no": "no", "more": "{n} more"}}


@dataclass
class Item:
    """One labelled value; ``children`` for a nested group (a rank map, the reference)."""

    label: str
    value: str = ""
    children: list["Item"] = field(default_factory=list)
    ident: bool = False  # the value is an identifier (a field path, an API name): shown as code, not translated
    quote: bool = False  # the value is what the student wrote: shown as written, not translated


def process_label(n: int, lang: str) -> str:
    """``1 process`` / ``2 processes`` (``2 个进程``)."""
    return f"{n} 个进程" if lang == "zh" else f"{n} process{'es' if n != 1 else ''}"


# Logs that are not a rank's: the notebook kernel's output (homework 2).
LOG_NAMES = {"kernel": ("笔记本内核的输出", "Notebook kernel output")}


def log_label(name: str, lang: str) -> str:
    """The title of one log block: a rank (``n2.rank0`` -> ``2 processes, rank 0``) or a named log."""
    if str(name) in LOG_NAMES:
        return LOG_NAMES[str(name)][0 if lang == "zh" else 1]
    if re.fullmatch(r"n\d+\.rank\d+|rank[_ ]?\d+|\d+", str(name)):
        return humanize_key(name, lang)
    return generic_label(name, lang)


def humanize_key(key: str, lang: str = "en") -> str:
    """``max_rel_diff`` -> ``Max rel diff``; ``rank1`` -> ``rank 1``; ``n2.rank0`` -> ``2 processes, rank 0``."""
    key = str(key)[:80]
    m = re.fullmatch(r"n(\d+)\.rank(\d+)", key)
    if m:
        return f"{process_label(int(m.group(1)), lang)}{'，' if lang == 'zh' else ', '}rank {m.group(2)}"
    m = re.fullmatch(r"rank[_ ]?(\d+)", key)
    if m or key.isdigit():
        return f"rank {m.group(1) if m else key}"
    words = re.sub(r"[_.]+", " ", key).strip()
    return words[:1].upper() + words[1:] if words else key


def kind_of(key: str, value: Any) -> str:
    """The unit a value is in, from the known labels or from its key's name."""
    if key in LABELS:
        return LABELS[key][2]
    k = key.lower()
    if k.endswith("_bytes") or k in ("bytes", "mem", "memory") or k.endswith(("_mem", "_memory", "_peak")):
        return "bytes"
    if k.endswith(("_at", "_ts", "_time", "timestamp")) or k in ("at", "ts", "time", "when"):
        return "when"
    if k.endswith(("_s", "_seconds", "_secs")):
        return "s"
    if k.endswith(("_per_s", "_sps", "throughput")):
        return "sps"
    if k.endswith(("_fraction", "_share", "_ratio_pct")):
        return "pct"
    return "plain"


def fmt_bytes(v: float) -> str:
    """Bytes for people: ``160 MiB``, ``3.2 GiB`` (binary units, as the card capacities are)."""
    v = float(v)
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(v) >= size:
            n = v / size
            return f"{n:.1f} {unit}" if n < 100 else f"{n:,.0f} {unit}"
    return f"{v:,.0f} B"


def fmt_number(v: float) -> str:
    """A plain number without float noise: ``1.83``, ``0.00012``, ``12,345``."""
    if isinstance(v, bool):
        return str(v)
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.3g}" if a < 100 else f"{v:.1f}"
    if a >= 1e-3:
        return f"{v:.3g}"
    return f"{v:.1e}"


def fmt_value(value: Any, kind: str, lang: str) -> str:
    """One scalar in its unit (``kind``), bounded."""
    u = UNITS["zh" if lang == "zh" else "en"]
    if value is None:
        return "—"
    if isinstance(value, bool):
        return u["yes"] if value else u["no"]
    if isinstance(value, dict) and {"zh", "en"} <= set(value):
        value = pick(value, lang)  # a grader's bilingual text
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return str(value)
        if kind == "bytes":
            return fmt_bytes(value)
        if kind == "when" or (kind == "plain" and 1e9 <= value <= 4.2e9 and not float(value).is_integer()):
            try:
                return datetime.fromtimestamp(value, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            except (OverflowError, OSError, ValueError):
                return fmt_number(value)
        if kind == "s":
            return f"{fmt_number(round(value, 1) if value >= 1 else value)} {u['s']}"
        if kind == "sps":
            return f"{fmt_number(round(value, 1))} {u['sps']}"
        if kind == "x":
            return f"{value:.2f}×"
        if kind == "pct":
            return f"{100 * value:.0f}%" if 0 <= value <= 1 else fmt_number(value)
        return fmt_number(value)
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _label(key: str, lang: str) -> str:
    if key in LABELS:
        zh, en, _ = LABELS[key]
        return zh if lang == "zh" else en
    if re.fullmatch(r"n\d+\.rank\d+|rank[_ ]?\d+|\d+", key):
        return humanize_key(key, lang)
    return generic_label(key, lang)


def _hidden(key: str, staff: bool) -> bool:
    return not staff and (key in STAFF_ONLY or bool(_STAFF_PATTERN.search(key)))


def evidence_items(evidence: Any, lang: str, staff: bool = False, depth: int = 0) -> list[Item]:
    """The evidence of one check as labelled values (nested groups at most ``MAX_DEPTH`` deep)."""
    if not isinstance(evidence, dict):
        return [Item("", fmt_value(evidence, "plain", lang))] if evidence not in (None, "", [], {}) else []
    items: list[Item] = []
    held = not staff and evidence.get("review") == "pending"
    keys = [k for k in evidence if not _hidden(str(k), staff) and not (held and k in HELD_READING_KEYS)]
    for key in keys[:MAX_ITEMS]:
        k, value = str(key), evidence[key]
        if value is None or value == "" or value == [] or value == {}:
            continue  # nothing to say
        kind = kind_of(k, value)
        if isinstance(value, dict) and {"zh", "en"} <= set(value):
            items.append(Item(_label(k, lang), fmt_value(pick(value, lang), "plain", lang)))  # a grader's bilingual text
        elif isinstance(value, dict):
            if depth >= MAX_DEPTH:
                items.append(Item(_label(k, lang), _inline_dict(value, lang, staff)))
            else:
                kids = evidence_items(value, lang, staff, depth + 1)
                if kids:
                    items.append(Item(_label(k, lang), "", kids))
        elif isinstance(value, (list, tuple)):
            items.append(Item(_label(k, lang), _list(value, kind, lang, staff, depth), ident=kind == "id"))
        elif kind in VALUES:
            items.append(Item(_label(k, lang), value_label(kind, str(value), lang) or fmt_value(value, "plain", lang),
                              ident=value_label(kind, str(value), lang) is None))
        else:
            items.append(Item(_label(k, lang), fmt_value(value, kind, lang),
                              ident=kind == "id" and isinstance(value, str), quote=kind == "quote"))
    if len(keys) > MAX_ITEMS:
        items.append(Item("…", UNITS["zh" if lang == "zh" else "en"]["more"].format(n=len(keys) - MAX_ITEMS)))
    return items


def _inline_dict(value: dict, lang: str, staff: bool) -> str:
    parts = [f"{_label(str(k), lang)}: {fmt_value(v, kind_of(str(k), v), lang) if not isinstance(v, (dict, list)) else '…'}"
             for k, v in list(value.items())[:MAX_ITEMS] if not _hidden(str(k), staff)]
    return fmt_value("; ".join(parts), "plain", lang)


def _list(value: list | tuple, kind: str, lang: str, staff: bool, depth: int) -> str:
    shown = []
    for v in list(value)[:MAX_ITEMS]:
        if isinstance(v, dict):
            shown.append(_inline_dict(v, lang, staff))
        elif isinstance(v, (list, tuple)):
            shown.append("[" + ", ".join(fmt_value(x, kind, lang) for x in list(v)[:MAX_ITEMS]) + "]")
        else:
            shown.append(fmt_value(v, kind, lang))
    more = len(value) - MAX_ITEMS
    comma, semicolon = ("、", "；") if lang == "zh" else (", ", "; ")  # Chinese lists take Chinese marks
    text = comma.join(shown) if all(len(s) < 40 for s in shown) else semicolon.join(shown)
    if more > 0:
        text += comma + UNITS["zh" if lang == "zh" else "en"]["more"].format(n=more)
    return fmt_value(text, "plain", lang) if text else "—"


def titles_for_ids(text: str, checks: list[dict], lang: str) -> str:
    """A grader's summary with every check id (``sampler.disjoint``) replaced by that check's title."""
    if not text:
        return ""
    names = {}
    for c in checks or []:
        cid, title = c.get("id"), c.get("title")
        if isinstance(cid, str) and cid:
            name = pick(title, lang) if isinstance(title, dict) else None
            names[cid] = f"“{name}”" if name else cid
    if not names:
        return text
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(i) for i in sorted(names, key=len, reverse=True))
                         + r")(?![\w])")
    return pattern.sub(lambda m: names[m.group(1)], text)


TIMING_LABELS = {"total_s": ("评分总用时", "Grading took"), "epochs": ("轮数", "Epochs"), "steps": ("步数", "Steps"),
                 "calibration_s": ("校准用时", "Calibration"),
                 "speed_pairs_s": ("速度复测（1 个与多个进程轮流）用时", "Speed measured again (1 and several processes in turn)")}


def stopped_steps(checks: Any) -> int | None:
    """The optimizer steps a run the grader stopped early took (its checks' ``stopped`` evidence), or None."""
    for c in checks or []:
        ev = c.get("evidence") if isinstance(c, dict) else None
        if isinstance(ev, dict) and ev.get("stopped") and isinstance(ev.get("steps"), int) and ev["steps"] >= 0:
            return min(ev["steps"], 10 ** 9)
    return None


def timing_items(timings: dict, lang: str, checks: Any = None) -> list[Item]:
    """``{"total_s": 41.2, "run_n1_s": 12.0, "run_n2_s": 18.3}`` as "Run with 1 process: 12 s". A run
    stopped early shows the steps it took, not the epochs configured (which it never reached)."""
    out = []
    stopped = stopped_steps(checks)
    for key, value in list((timings or {}).items())[:MAX_ITEMS]:
        k = str(key)
        m = re.fullmatch(r"run_n(\d+)_s", k)
        if m:
            n = int(m.group(1))
            label = f"{n} 个进程的运行" if lang == "zh" else f"Run with {process_label(n, lang)}"
            out.append(Item(label, fmt_value(value, "s", lang)))
        elif k == "epochs" and stopped is not None:
            out.append(Item("轮数" if lang == "zh" else "Epochs",
                            f"提前停止，只跑了 {stopped} 步" if lang == "zh" else
                            f"stopped early after {stopped} step{'s' if stopped != 1 else ''}"))
        elif k in TIMING_LABELS:
            zh, en = TIMING_LABELS[k]
            out.append(Item(zh if lang == "zh" else en, fmt_value(value, "s" if k.endswith("_s") else "plain", lang)))
        else:
            out.append(Item(humanize_key(k.removesuffix("_s"), lang), fmt_value(value, kind_of(k, value), lang)))
    return out


_NONE_PAREN = re.compile(r"\s*[（(][^()（）]*\bNone\b[^()（）]*[)）]")


def clean_message(text: str) -> str:
    """Drop a parenthesis that only says "line None" (a grader that could not place the error)."""
    return _NONE_PAREN.sub("", text or "")


@dataclass
class SyntaxProblem:
    line: int | None
    message: str
    code: str = ""
    caret: str = ""


_SYNTAX_TYPES = ("SyntaxError", "IndentationError", "TabError")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')


def syntax_problem(evidence: Any) -> SyntaxProblem | None:
    """From a check's ``evidence.exception``: the syntax error's line, message, code line and caret."""
    exc = evidence.get("exception") if isinstance(evidence, dict) else None
    if not isinstance(exc, dict) or exc.get("exc_type") not in _SYNTAX_TYPES:
        return None
    tb = str(exc.get("traceback") or "")[-4000:]
    lines = tb.splitlines()
    line, code, caret = exc.get("line"), "", ""
    for i in range(len(lines) - 1, -1, -1):
        m = _FRAME.match(lines[i])
        if m:
            line = int(m.group(2))
            rest = lines[i + 1:]
            if rest and not rest[0].lstrip().startswith(_SYNTAX_TYPES):
                code = rest[0]
                if len(rest) > 1 and set(rest[1].strip()) <= {"^", "~"} and rest[1].strip():
                    caret = rest[1]
            break
    msg = str(exc.get("message") or "")
    msg = re.sub(r"\s*\([^()]*line \d+\)$", "", msg) or exc.get("exc_type")
    if code:  # keep the caret under its column once the common indentation is gone
        pad = len(code) - len(code.lstrip())
        code, caret = code[pad:], caret[pad:] if caret[:pad].strip() == "" else caret.lstrip()
    return SyntaxProblem(line if isinstance(line, int) else None, msg[:300], code[:300], caret[:300])


_PATH = re.compile(r"(?:/[\w.@+-]+)+/([\w.@+-]+)")


def student_log(text: str, own_files: tuple[str, ...] = ("train.py",)) -> str:
    """A rank's log for the student: traceback frames outside their own files and host paths removed.

    The launcher (torchrun, runpy, the harness) adds dozens of frames that say nothing about
    the student's code and reveal the grading host's layout.
    """
    out: list[str] = []
    lines = (text or "").splitlines()
    skip_source = False
    hidden = 0
    for line in lines:
        m = _FRAME.match(line)
        if m:
            own = m.group(1).rsplit("/", 1)[-1] in own_files
            skip_source = not own
            if not own:
                hidden += 1
                continue
        elif skip_source and line.startswith("    "):
            continue  # the source line of a hidden frame
        else:
            skip_source = False
        out.append(_PATH.sub(r"\1", line))
    return "\n".join(out)
