"""Server-side SVG charts for a report's ``plots``: no JavaScript library, works offline and in print.

``plots`` holds plain series. A mapping of label -> number (``throughput``:
{"1": 410.2, "2": 760.9}) or a pair of columns ({"nproc": [1, 2], "samples_per_s":
[410.2, 760.9]}) draws as bars; a mapping of label -> list of numbers (``loss``:
{"n1.rank0": [...], "n2.rank0": [...]}) draws as lines over the step number; homework 3's
``memory`` record draws per-rank peaks beside the analytic estimates with the card's capacity as
a line. Anything else is skipped.

Every chart has axis titles with units, ticks at round values (1, 2 or 5 times a power of ten,
never "9e-05"), and a viewBox small enough that its 13-unit text stays legible on a 375 px phone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

W, H = 420, 270  # viewBox; the SVG scales to its container (about 340 px wide on a phone)
PAD_L, PAD_R, PAD_T = 60, 12, 14
PALETTE = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2"]
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
MAX_SERIES, MAX_BARS = 8, 24


@dataclass
class Chart:
    """One chart ready for the template: its name, kind, caption and SVG markup."""

    name: str
    kind: str  # bar | line
    svg: Markup
    title: str = ""


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(1, target - 1)
    exp = 10 ** math.floor(math.log10(raw))
    step = next(m * exp for m in (1, 2, 2.5, 5, 10) if raw <= m * exp)
    start = math.floor(lo / step) * step
    ticks, v = [], start
    while v < hi - step * 1e-9:
        ticks.append(v)
        v += step
    ticks.append(v)
    return [round(t, 12) for t in ticks]


def tick_label(v: float, step: float) -> str:
    """A tick's text with just the decimals its step needs (``0.25``, ``1,500``, ``0``)."""
    if abs(v) < step * 1e-6:
        return "0"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if step < 1 and not float(f"{step:.{decimals}f}") == step:
        decimals += 1
    return f"{v:,.{decimals}f}"


def value_text(v: float, step: float) -> str:
    """A bar's value: a tenth of the axis step in precision, but like a score at most two decimals
    (a facility of 1/3 reads 0.33, not 0.333, beside the tables' two-decimal numbers)."""
    shown = tick_label(v, step / 10)
    return f"{v:,.2f}" if len(shown.partition(".")[2]) > 2 else shown


def _nice_max(v: float) -> float:
    """A round axis maximum at or above ``v`` (kept for callers that want one number)."""
    return nice_ticks(0, v)[-1] if v > 0 else 1.0


def _text(x: float, y: float, s: str, cls: str = "tick", anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" class="{cls}"{extra}>{escape(s)}</text>'


def _y_axis(ticks: list[float], lo: float, hi: float, top: int, bottom: int, title: str,
            labels: list[str] | None = None) -> list[str]:
    """Grid lines, tick labels and the rotated axis title on the left."""
    parts = []
    plot_h = bottom - top
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    for i, t in enumerate(ticks):
        y = bottom - plot_h * (t - lo) / (hi - lo)
        parts.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(_text(PAD_L - 5, y + 4, labels[i] if labels else tick_label(t, step), anchor="end"))
    if title:
        cy = (top + bottom) / 2
        parts.append(_text(14, cy, title, "axis", extra=f' transform="rotate(-90 14 {cy:.1f})"'))
    return parts


def bar_chart(title: str, series: dict[str, float], *, x_title: str = "", y_title: str = "",
              line: tuple[float, str] | None = None, colors: list[str] | None = None,
              names: frozenset[str] = frozenset()) -> Markup:
    """Bars, one per label, in the order given; ``line``: a horizontal reference (value, label);
    ``names``: labels that are identifiers (a config field), the same in every language."""
    labels = list(series)[:MAX_BARS]
    values = [max(0.0, series[k]) for k in labels]
    top_value = max(values + ([line[0]] if line else []) + [0.0])
    ticks = nice_ticks(0, top_value or 1.0)
    if all(float(v).is_integer() for v in values) and len(ticks) > 1 and ticks[1] < 1:
        ticks = [float(i) for i in range(0, int(math.ceil(max(1.0, top_value))) + 1)]  # counts: whole students
    hi = ticks[-1]
    slot = (W - PAD_L - PAD_R) / max(1, len(labels))
    two = any(len(_two_lines(k, slot)) > 1 for k in labels)
    bottom = H - (44 if x_title else 28) - (13 if two else 0)
    plot_w, plot_h = W - PAD_L - PAD_R, bottom - PAD_T
    parts = [f"<title>{escape(title)}</title>"] + _y_axis(ticks, 0, hi, PAD_T, bottom, y_title)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    for i, label in enumerate(labels):
        v = values[i]
        bh = plot_h * v / hi
        x = PAD_L + slot * i + slot * 0.18
        y = bottom - bh
        color = (colors or [PALETTE[0]])[i % len(colors or [PALETTE[0]])]
        shown = f"{v:,.0f}" if float(v).is_integer() else value_text(v, step)
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.64:.1f}" height="{bh:.1f}" fill="{color}" '
                     f'rx="3"><title>{escape(label)}: {shown}</title></rect>')
        parts.append(_text(x + slot * 0.32, y - 4, shown, "val"))
        for j, piece in enumerate(_two_lines(label, slot)):
            parts.append(_text(x + slot * 0.32, bottom + 15 + 13 * j, piece,
                               extra=' translate="no"' if label in names else ""))
    if line:
        y = bottom - plot_h * line[0] / hi
        parts.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="limit"/>')
        parts.append(_text(W - PAD_R - 2, y - 4, line[1], "limit-label", anchor="end"))
    if x_title:
        parts.append(_text(PAD_L + plot_w / 2, H - 8, x_title, "axis"))
    return _svg(title, parts)


def _two_lines(label: str, width: float) -> list[str]:
    """A bar label on one line, or split at a space onto two, each cut to fit under its bar."""
    room = max(3, int(width / 7))
    if len(label) <= room or " " not in label:
        return [_short(label, width)]
    cut = min((i for i, ch in enumerate(label) if ch == " "), key=lambda i: abs(i - len(label) / 2))
    return [_short(label[:cut], width), _short(label[cut + 1:], width)]


def text_width(s: str) -> float:
    """About how wide ``s`` is at the charts' 13-unit font (CJK characters are twice as wide)."""
    return sum(13 if ord(ch) > 0x2e80 else 7 for ch in s)


def _short(label: str, width: float) -> str:
    """A bar label cut to what fits under its bar (about 7 units per character)."""
    room = max(3, int(width / 7))
    return label if len(label) <= room else label[:room - 1] + "…"


def line_chart(title: str, series: dict[str, list[float]], *, x_title: str = "", y_title: str = "") -> Markup:
    """One polyline per series over its step number (1, 2, ...), with a legend under the plot.

    Values spanning more than three decades (a loss that falls from 10 to 1e-4) use a log
    scale with ticks at powers of ten, or the whole descent hides in one corner.
    """
    series = dict(list(series.items())[:MAX_SERIES])
    values = [v for vs in series.values() for v in vs]
    positive = [v for v in values if v > 0]
    log = bool(values) and min(values) >= 0 and bool(positive) and max(values) / min(positive) > 1000
    if log:
        floor = min(positive)
        series = {k: [math.log10(max(v, floor)) for v in vs] for k, vs in series.items()}
        values = [v for vs in series.values() for v in vs]
    lo, hi = min(values), max(values)
    if log:
        ticks = list(range(math.floor(lo), math.ceil(hi) + 1)) if hi > lo else [math.floor(lo), math.floor(lo) + 1]
        labels = [f"10{str(t).translate(SUPERSCRIPT)}" if t not in (0, 1) else ("1" if t == 0 else "10") for t in ticks]
    else:
        if 0 <= lo < hi * 0.5:
            lo = 0.0
        ticks, labels = nice_ticks(lo, hi), None
    lo, hi = ticks[0], ticks[-1]
    legend_rows = _legend_rows(list(series))
    bottom = H - (40 if x_title else 24) - 18 * len(legend_rows)
    plot_w, plot_h = W - PAD_L - PAD_R, bottom - PAD_T
    parts = [f"<title>{escape(title)}</title>"] + _y_axis(ticks, lo, hi, PAD_T, bottom, y_title, labels)
    longest = max(len(vs) for vs in series.values())
    xt = nice_ticks(1, max(2, longest), 6)
    xt = [t for t in xt if 1 <= t <= longest] or [1]
    for t in xt:
        x = PAD_L + plot_w * (t - 1) / max(longest - 1, 1)
        parts.append(_text(x, bottom + 15, f"{t:g}"))
    for n, (label, vs) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        pts = " ".join(f"{PAD_L + plot_w * i / max(longest - 1, 1):.1f},"
                       f"{bottom - plot_h * (v - lo) / (hi - lo):.1f}" for i, v in enumerate(vs))
        dash = ' stroke-dasharray="5 3"' if n % 2 else ""
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"{dash} '
                     f'stroke-linejoin="round" opacity="0.9"><title>{escape(label)}</title></polyline>')
    for row_i, row in enumerate(legend_rows):
        y = bottom + (50 if x_title else 34) + 18 * row_i
        x = PAD_L
        for label, n in row:
            color = PALETTE[n % len(PALETTE)]
            parts.append(f'<rect x="{x}" y="{y - 5}" width="14" height="4" fill="{color}"/>')
            parts.append(_text(x + 18, y, label, anchor="start"))
            x += 26 + text_width(label)
    if x_title:
        parts.append(_text(PAD_L + plot_w / 2, bottom + 32, x_title, "axis"))
    return _svg(title, parts)


def _legend_rows(labels: list[str]) -> list[list[tuple[str, int]]]:
    """Legend entries wrapped into rows that fit the plot's width."""
    rows: list[list[tuple[str, int]]] = [[]]
    used = 0
    for n, label in enumerate(labels):
        width = 26 + text_width(label)  # CJK characters are twice as wide: "2 个进程，rank 0"
        if rows[-1] and used + width > W - PAD_L - PAD_R:
            rows.append([])
            used = 0
        rows[-1].append((label, n))
        used += width
    return rows


def hbar_chart(title: str, series: dict[str, float], *, x_title: str = "", line: tuple[float, str] | None = None,
               colors: list[str] | None = None) -> Markup:
    """Horizontal bars (labels on the left, so many bars stay legible on a phone) with an optional
    vertical reference line (value, label), e.g. a card's capacity."""
    labels = list(series)[:MAX_BARS]
    values = [max(0.0, series[k]) for k in labels]
    ticks = nice_ticks(0, max(values + ([line[0]] if line else []) + [1e-9]))
    hi = ticks[-1]
    left = 12 + min(120, max(text_width(k) for k in labels))
    row, top = 24, 34 if line else 12
    height = top + row * len(labels) + (48 if x_title else 30)
    plot_w = W - left - PAD_R - 24
    bottom = top + row * len(labels)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    parts = [f"<title>{escape(title)}</title>"]
    for t in ticks:
        x = left + plot_w * t / hi
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}" class="grid"/>')
        parts.append(_text(x, bottom + 15, tick_label(t, step)))
    for i, label in enumerate(labels):
        y = top + row * i + 4
        w = plot_w * values[i] / hi
        color = (colors or [PALETTE[0]])[i % len(colors or [PALETTE[0]])]
        parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{row - 8}" fill="{color}" rx="3">'
                     f'<title>{escape(label)}: {value_text(values[i], step)}</title></rect>')
        parts.append(_text(left - 6, y + row / 2, label, anchor="end"))
        parts.append(_text(left + w + 4, y + row / 2, value_text(values[i], step), "val", anchor="start"))
    if line:
        x = left + plot_w * line[0] / hi
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" y2="{bottom}" class="limit"/>')
        parts.append(_text(W - PAD_R, top - 12, line[1], "limit-label", anchor="end"))
    if x_title:
        parts.append(_text(left + plot_w / 2, height - 8, x_title, "axis"))
    return _svg(title, parts, height)


def _svg(title: str, parts: list[str], height: int = H) -> Markup:
    return Markup(f'<svg viewBox="0 0 {W} {height}" role="img" aria-label="{escape(title)}" class="chart" '
                  f'xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>")


X_KEYS = ("nproc", "x", "labels", "ranks", "processes")  # a column of x labels, not a series


def _columns_to_bars(series: dict[str, Any]) -> dict[str, float] | None:
    """``{"nproc": [1, 2], "samples_per_s": [410, 760]}`` -> ``{"1": 410, "2": 760}`` (None if not that shape)."""
    keys = list(series)
    if len(keys) != 2 or keys[0] not in X_KEYS:
        return None
    xs, ys = series[keys[0]], series[keys[1]]
    if not (isinstance(xs, list) and isinstance(ys, list) and len(xs) == len(ys)):
        return None
    bars = {str(x): float(y) for x, y in zip(xs, ys) if _is_number(y)}
    return bars or None


def _is_memory_record(series: dict[str, Any]) -> bool:
    return isinstance(series.get("ranks"), list) and _is_number(series.get("capacity"))


def charts_for(plots: dict[str, Any], labels: Any = None) -> list[Chart]:
    """The charts that can be drawn from a report's ``plots`` (unknown shapes are skipped).

    ``labels`` (``ChartLabels``) gives titles, axis titles and legend names in the page's
    language; without it the plot names are used as they are.
    """
    from server.homework.chart_labels import ChartLabels  # text for the page's language

    t = labels or ChartLabels("en")
    charts = []
    for name, series in list((plots or {}).items())[:8]:
        if not isinstance(series, dict) or not series:
            continue
        name = str(name)[:40]
        title, x_title, y_title = t.titles(name)
        if _is_memory_record(series):
            chart = memory_chart(series, t)
            if chart is not None:
                charts.append(Chart(name, "bar", chart, t.memory_title))
        elif (bars := _columns_to_bars(series)) is not None or all(_is_number(v) for v in series.values()):
            bars = bars or {str(k): float(v) for k, v in series.items()}
            bars = {t.bar_label(name, k): v for k, v in bars.items()}
            charts.append(Chart(name, "bar", bar_chart(title, bars, x_title=x_title, y_title=y_title), title))
        elif all(isinstance(v, list) and v and all(_is_number(x) for x in v) for v in series.values()):
            lines = {t.series_label(str(k)): [float(x) for x in v] for k, v in series.items()}
            charts.append(Chart(name, "line", line_chart(title, lines, x_title=x_title, y_title=y_title), title))
    return charts


def memory_chart(rec: dict[str, Any], t: Any) -> Markup | None:
    """Homework 3: each rank's measured peak, the 1-process baseline and the calculator's estimate of
    every ZeRO stage, against the (scaled) card's capacity drawn as a line."""
    capacity = float(rec["capacity"])
    bars: dict[str, float] = {}
    colors: list[str] = []
    for r in rec.get("ranks") or []:
        if isinstance(r, dict) and _is_number(r.get("peak")):
            bars[t.rank_bar(r.get("rank"))] = float(r["peak"])
            colors.append(PALETTE[0])
    base = rec.get("baseline") or {}
    for r in (base.get("ranks") or [])[:1] if isinstance(base, dict) else []:
        if isinstance(r, dict) and _is_number(r.get("peak")):
            bars[t.baseline_bar] = float(r["peak"])
            colors.append(PALETTE[1])
    for e in rec.get("estimates") or []:
        if isinstance(e, dict) and _is_number(e.get("total")):
            bars[t.stage_bar(e.get("stage"))] = float(e["total"])
            colors.append("#94a3b8")
    if not bars:
        return None
    unit, div = ("GiB", 2 ** 30) if max(list(bars.values()) + [capacity]) >= 2 ** 30 else ("MiB", 2 ** 20)
    scaled = {k: v / div for k, v in bars.items()}
    mirror = rec.get("mirror") if isinstance(rec.get("mirror"), dict) else {}
    card = t.card_name(str(rec.get("card") or "")[:60], mirror.get("capacity"), str(rec.get("size") or "")[:20])
    return hbar_chart(t.memory_title, scaled, x_title=t.memory_y(unit),
                      line=(capacity / div, t.capacity_label(card, capacity / div, unit)), colors=colors)
