"""Server-side SVG charts for a report's ``plots``: no JavaScript library, works offline and in print.

``plots`` holds plain series. A mapping of label -> number (``throughput``:
{"1": 410.2, "2": 760.9}) or a pair of columns ({"nproc": [1, 2], "samples_per_s":
[410.2, 760.9]}) draws as bars; a mapping of label -> list of numbers (``loss``:
{"run1": [...], "run2": [...]}) draws as lines. Anything else is skipped.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

W, H = 560, 260  # viewBox; the SVG scales to its container
PAD_L, PAD_R, PAD_T, PAD_B = 56, 16, 16, 40
PALETTE = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2"]


@dataclass
class Chart:
    """One chart ready for the template: its name, kind and SVG markup."""

    name: str
    kind: str  # bar | line
    svg: Markup


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _nice_max(v: float) -> float:
    """A round axis maximum at or above ``v`` (1, 2, 2.5 or 5 times a power of ten)."""
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for step in (1, 2, 2.5, 5, 10):
        if v <= step * exp:
            return step * exp
    return 10 * exp


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _axes(lo: float, hi: float, title: str, log: bool = False) -> list[str]:
    """Horizontal grid lines with value labels, shared by both chart kinds (``log``: lo/hi are log10)."""
    parts = []
    plot_h = H - PAD_T - PAD_B
    for i in range(5):
        val = lo + (hi - lo) * i / 4
        y = PAD_T + plot_h - plot_h * i / 4
        label = f"{10 ** val:.2g}" if log else _fmt(val)
        parts.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{label}</text>')
    return [f"<title>{escape(title)}</title>"] + parts


def bar_chart(title: str, series: dict[str, float]) -> Markup:
    """Bars, one per label, in the order given (e.g. samples/s per number of ranks)."""
    labels = list(series)
    top = _nice_max(max(series.values()))
    plot_w, plot_h = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    slot = plot_w / len(labels)
    parts = _axes(0, top, title)
    for i, label in enumerate(labels):
        v = series[label]
        bh = plot_h * max(v, 0) / top
        x = PAD_L + slot * i + slot * 0.2
        y = PAD_T + plot_h - bh
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.6:.1f}" height="{bh:.1f}" '
                     f'fill="{PALETTE[0]}" rx="3"><title>{escape(label)}: {_fmt(v)}</title></rect>')
        parts.append(f'<text x="{x + slot * 0.3:.1f}" y="{y - 5:.1f}" text-anchor="middle" class="val">{_fmt(v)}</text>')
        parts.append(f'<text x="{x + slot * 0.3:.1f}" y="{H - PAD_B + 18}" text-anchor="middle" '
                     f'class="tick">{escape(label)}</text>')
    return _svg(title, parts)


def line_chart(title: str, series: dict[str, list[float]]) -> Markup:
    """One polyline per series, each stretched over the whole run (0-100 %), with a legend.

    Runs with different step counts (1 rank does twice the steps of each of 2 ranks)
    then line up by progress. Values spanning more than three decades (a loss that
    falls from 10 to 1e-4) use a log scale, or the whole descent hides in one corner.
    """
    values = [v for vs in series.values() for v in vs]
    positive = [v for v in values if v > 0]
    # Losses logged with 5 decimals reach exactly 0: such points sit on the floor of a log axis.
    log = min(values) >= 0 and bool(positive) and max(values) / min(positive) > 1000
    if log:
        floor = min(positive)
        series = {k: [math.log10(max(v, floor)) for v in vs] for k, vs in series.items()}
        values = [v for vs in series.values() for v in vs]
    lo, hi = min(values), max(values)
    if not log and 0 <= lo < hi * 0.5:
        lo = 0.0
    hi = hi if hi > lo else lo + 1
    plot_w, plot_h = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    parts = _axes(lo, hi, title, log=log)
    for n, (label, vs) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        pts = " ".join(f"{PAD_L + plot_w * i / max(len(vs) - 1, 1):.1f},"
                       f"{PAD_T + plot_h - plot_h * (v - lo) / (hi - lo):.1f}" for i, v in enumerate(vs))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.6" '
                     f'stroke-linejoin="round" opacity="0.9"><title>{escape(label)}</title></polyline>')
        lx = PAD_L + n * 120
        parts.append(f'<rect x="{lx}" y="{H - 16}" width="12" height="4" fill="{color}"/>'
                     f'<text x="{lx + 16}" y="{H - 11}" class="tick">{escape(label)}</text>')
    parts.append(f'<text x="{PAD_L}" y="{H - PAD_B + 16}" class="tick">0%</text>'
                 f'<text x="{W - PAD_R}" y="{H - PAD_B + 16}" text-anchor="end" class="tick">100%</text>')
    return _svg(title, parts)


def _svg(title: str, parts: list[str]) -> Markup:
    return Markup(f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{escape(title)}" class="chart" '
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


def charts_for(plots: dict[str, Any]) -> list[Chart]:
    """The charts that can be drawn from a report's ``plots`` (unknown shapes are skipped)."""
    charts = []
    for name, series in (plots or {}).items():
        if not isinstance(series, dict) or not series:
            continue
        if (bars := _columns_to_bars(series)) is not None:
            charts.append(Chart(name, "bar", bar_chart(name, bars)))
        elif all(_is_number(v) for v in series.values()):
            charts.append(Chart(name, "bar", bar_chart(name, {str(k): float(v) for k, v in series.items()})))
        elif all(isinstance(v, list) and v and all(_is_number(x) for x in v) for v in series.values()):
            charts.append(Chart(name, "line", line_chart(
                name, {str(k): [float(x) for x in v] for k, v in series.items()})))
    return charts
