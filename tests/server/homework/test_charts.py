"""Report charts people can read: axis titles with units, round ticks, steps on x, legends named by
process count and rank, and homework 3's per-rank memory against the card with the calculator's
estimates."""
from __future__ import annotations

import re

import pytest

from server.homework.chart_labels import ChartLabels
from server.homework.charts import charts_for, nice_ticks, tick_label


def _texts(svg) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", str(svg))


@pytest.mark.parametrize("lo, hi, expected", [(0, 1670, [0, 500, 1000, 1500, 2000]), (0, 2.3, [0, 1, 2, 3]),
                                              (0.0009, 0.0017, [0.0008, 0.001, 0.0012, 0.0014, 0.0016, 0.0018])])
def test_ticks_are_round_numbers(lo, hi, expected):
    assert nice_ticks(lo, hi) == pytest.approx(expected)


def test_tick_labels_are_plain_decimals():
    assert [tick_label(v, 0.5) for v in (0, 0.5, 1.0, 2.5)] == ["0", "0.5", "1.0", "2.5"]
    assert tick_label(1500, 500) == "1,500" and tick_label(0.0012, 0.0002) == "0.0012"


def test_loss_chart_has_axis_titles_steps_and_process_legend():
    plots = {"loss": {"n1.rank0": [2.3, 1.9, 1.5, 1.2, 1.0, 0.9], "n2.rank0": [2.3, 1.7, 1.2],
                      "n2.rank1": [2.3, 1.8, 1.3]}}
    (chart,) = charts_for(plots, ChartLabels("en"))
    texts = _texts(chart.svg)
    assert "optimizer step" in texts and "loss" in texts
    assert {"1 process, rank 0", "2 processes, rank 0", "2 processes, rank 1"} <= set(texts)
    assert not any(re.search(r"\de-\d", t) for t in texts)  # no "9e-05"
    zh = _texts(charts_for(plots, ChartLabels("zh"))[0].svg)
    assert "1 个进程，rank 0" in zh and "优化器步数" in zh and "损失" in zh


def test_a_loss_spanning_decades_has_power_of_ten_ticks():
    (chart,) = charts_for({"loss": {"rank0": [10.0, 1.0, 0.01, 0.0001]}}, ChartLabels("en"))
    texts = _texts(chart.svg)
    assert "10⁻⁴" in texts and "1" in texts and not any("e-" in t for t in texts)


def test_throughput_bars_are_labelled_by_process_count():
    (chart,) = charts_for({"throughput": {"nproc": [1, 2], "samples_per_s": [1670.2, 1187.1]}}, ChartLabels("en"))
    texts = _texts(chart.svg)
    assert {"1 process", "2 processes", "throughput (samples/s)", "processes"} <= set(texts)


def test_homework3_memory_chart_against_the_card_with_the_calculator():
    gib = 2 ** 30
    memory = {"unit": "bytes", "capacity": 0.16 * gib, "card": "T4 (15 GiB, scaled to small)", "size": "small",
              "mirror": {"size": "1b", "capacity": 15 * gib},
              "ranks": [{"rank": 0, "peak": 0.09 * gib}, {"rank": 1, "peak": 0.091 * gib}],
              "baseline": {"nproc": 1, "ranks": [{"rank": 0, "peak": 0.2 * gib}]},
              "estimates": [{"stage": s, "total": (0.19 - 0.03 * s) * gib} for s in range(4)]}
    (chart,) = charts_for({"memory": memory}, ChartLabels("en"))
    svg = str(chart.svg)
    texts = _texts(svg)
    assert {"rank 0", "rank 1", "1 process", "ZeRO-0", "ZeRO-3", "memory (MiB)"} <= set(texts)
    assert 'class="limit"' in svg and "T4 (15 GiB) scaled to small: 163.8 MiB" in texts
    assert chart.title.startswith("Peak memory per rank against the card")
    zh = _texts(charts_for({"memory": memory}, ChartLabels("zh"))[0].svg)
    assert "T4（15 GiB）按 small 缩放：163.8 MiB" in zh and "显存（MiB）" in zh


def test_homework3_says_one_memory_unit_in_its_texts_and_its_chart():
    """Homework 3's READMEs said 168 MB while its chart showed MiB (160.0): one unit, the chart's."""
    from pathlib import Path

    from graders.fsdp_fit.grader import capacity_bytes
    from tests.server.ui.pages_seed import card_report

    folder = Path(__file__).resolve().parents[3] / "assignments" / "fsdp_fit"
    card = __import__("json").loads((folder / "assignment.json").read_text())["card"]
    mib = capacity_bytes(card, 12232704) / 2 ** 20
    for name in ("README.md", "README.zh.md"):
        text = (folder / name).read_text(encoding="utf-8")
        assert not re.search(r"\d\s*MB\b", text), name
        assert f"{mib:.0f} MiB" in text, name
    for lang in ("zh", "en"):
        (chart,) = [c for c in charts_for(card_report()["plots"], ChartLabels(lang)) if c.name == "memory"]
        assert f"{mib:.1f} MiB" in str(chart.svg)
