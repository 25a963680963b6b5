"""The words on a report's charts, in the page's language: titles, axis titles with units, legend
names ("1 process, rank 0" / "1 个进程，rank 0") and bar labels. Kept apart from the drawing code
so charts.py stays free of Flask; ``for_page()`` builds one for the current request."""
from __future__ import annotations

import re
from dataclasses import dataclass

from server.homework.readable import humanize_key, process_label
from server.ui import lang_key

TEXT = {
    "zh": {"throughput": ("各进程数下的吞吐", "进程数", "吞吐（样本/秒）"),
           "loss": ("训练损失", "优化器步数", "损失"),
           "speedup": ("各进程数下的加速比", "进程数", "加速比（×）"),
           "memory": "每个 rank 的峰值显存与卡的容量（蓝：实测；橙：1 个进程；灰：计算器估算）", "memory_x": "",
           "memory_y": "显存（{unit}）", "capacity": "{card}：{value:.1f} {unit}",
           "baseline": "1 个进程", "stage": "ZeRO-{stage}", "rank": "rank {rank}"},
    "en": {"throughput": ("Throughput by number of processes", "processes", "throughput (samples/s)"),
           "loss": ("Training loss", "optimizer step", "loss"),
           "speedup": ("Speed-up by number of processes", "processes", "speed-up (×)"),
           "memory": "Peak memory per rank against the card (blue: measured; orange: 1 process; grey: calculator)", "memory_x": "",
           "memory_y": "memory ({unit})", "capacity": "{card}: {value:.1f} {unit}",
           "baseline": "1 process", "stage": "ZeRO-{stage}", "rank": "rank {rank}"},
}


@dataclass
class ChartLabels:
    lang: str = "en"

    @property
    def _t(self) -> dict:
        return TEXT["zh" if self.lang == "zh" else "en"]

    def titles(self, name: str) -> tuple[str, str, str]:
        """(title, x axis title, y axis title) of a plot by its name; unknown names get their own name."""
        value = self._t.get(name)
        if isinstance(value, tuple):
            return value
        return humanize_key(name, self.lang), "", ""

    def bar_label(self, plot: str, key: str) -> str:
        """An x label: process counts for the throughput and speed-up bars."""
        if plot in ("throughput", "speedup") and str(key).isdigit():
            return process_label(int(key), self.lang)
        return str(key)[:40]

    def series_label(self, key: str) -> str:
        """``n2.rank1`` -> ``2 processes, rank 1``; ``rank0`` -> ``rank 0``; others as given."""
        if re.fullmatch(r"n\d+\.rank\d+|rank[_ ]?\d+", key):
            return humanize_key(key, self.lang)
        return key[:40]

    @property
    def memory_title(self) -> str:
        return self._t["memory"]

    @property
    def memory_x(self) -> str:
        return self._t["memory_x"]

    def memory_y(self, unit: str) -> str:
        return self._t["memory_y"].format(unit=unit)

    def card_name(self, label: str, capacity_bytes, size: str) -> str:
        """The simulated card in the page's language: "T4 (15 GiB) scaled to small" / "T4（15 GiB）按 small 缩放"."""
        name = label.split(" (")[0].split("（")[0].strip() or label
        if not isinstance(capacity_bytes, (int, float)) or not size:
            return name
        gib = capacity_bytes / 2 ** 30
        return f"{name}（{gib:g} GiB）按 {size} 缩放" if self.lang == "zh" else f"{name} ({gib:g} GiB) scaled to {size}"

    def capacity_label(self, card: str, value: float, unit: str) -> str:
        return self._t["capacity"].format(card=card, value=value, unit=unit)

    @property
    def baseline_bar(self) -> str:
        return self._t["baseline"]

    def stage_bar(self, stage) -> str:
        return self._t["stage"].format(stage=stage)

    def rank_bar(self, rank) -> str:
        return self._t["rank"].format(rank=rank)


def for_page() -> ChartLabels:
    return ChartLabels(lang_key())
