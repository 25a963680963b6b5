"""``/calculator``: the shared ZeRO/FSDP memory calculator (``coursework.memory_calc``) as a page.

Inputs arrive as a GET query so a result can be bookmarked and shared with a classmate;
every invalid input is named next to its field, never a server error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flask import Blueprint, render_template, request
from flask_babel import gettext as _

from coursework.memory_calc import (GB, GIB, FsdpStrategy, Optimizer, Precision, TrainingSetup, estimate)
from server.homework.charts import bar_chart
from server.ui import lang_key

bp = Blueprint("calculator", __name__, url_prefix="/calculator")

_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "千": 1e3, "万": 1e4, "亿": 1e8, "万亿": 1e12}
STRATEGIES = ["zero0", "zero1", "zero2", "zero3"] + [s.value for s in FsdpStrategy]


def parse_params(text: str) -> float:
    """'7B', '1.3b', '350M', '7e9', '7,000,000,000', '70亿', '350万' -> number of parameters."""
    m = re.fullmatch(r"\s*([0-9][0-9_,]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*(万亿|[kmbgt千万亿]?)\s*", text.lower())
    if not m:
        raise ValueError(text)
    value = float(m.group(1).replace(",", "").replace("_", "")) * _SUFFIX[m.group(2)]
    if not 0 < value < 1e15:
        raise ValueError(text)
    return value


@dataclass
class Form:
    """The page's inputs with their defaults (the chapter's 7B example) and any errors."""

    params: str = "7B"
    cards: str = "8"
    precision: str = Precision.BF16_MIXED.value
    optimizer: str = Optimizer.ADAMW.value
    strategy: str = "zero3"
    card_gb: str = "24"
    offload_optimizer: bool = False
    offload_params: bool = False
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls) -> "Form":
        a = request.args
        return cls(params=a.get("params", cls.params)[:40], cards=a.get("cards", cls.cards)[:6],
                   precision=a.get("precision", cls.precision), optimizer=a.get("optimizer", cls.optimizer),
                   strategy=a.get("strategy", cls.strategy), card_gb=a.get("card_gb", cls.card_gb)[:8],
                   offload_optimizer=a.get("offload_optimizer") == "1",
                   offload_params=a.get("offload_params") == "1")

    def setup(self, strategy: str | None = None) -> TrainingSetup | None:
        """The TrainingSetup these inputs describe, or None with ``errors`` filled in (every bad field)."""
        params = cards = None
        try:
            params = parse_params(self.params)
        except ValueError:
            self.errors["params"] = _("Write a parameter count such as 7B, 1.3B, 350M, 7e9 or 70亿.")
        try:
            cards = int(self.cards)
            if not 1 <= cards <= 100000:
                raise ValueError
        except ValueError:
            self.errors["cards"] = _("The number of cards must be a whole number from 1 to 100000.")
            cards = None
        strategy = strategy or self.strategy
        if strategy not in STRATEGIES or self.precision not in [p.value for p in Precision] \
                or self.optimizer not in [o.value for o in Optimizer]:
            self.errors["strategy"] = _("Choose one of the listed options.")
            return None
        if params is None or cards is None:
            return None
        stage = int(strategy[-1]) if strategy.startswith("zero") else 0
        fsdp = None if strategy.startswith("zero") else FsdpStrategy(strategy)
        try:
            return TrainingSetup(params=params, cards=cards, precision=Precision(self.precision),
                                 optimizer=Optimizer(self.optimizer), stage=stage, fsdp=fsdp,
                                 offload_optimizer=self.offload_optimizer, offload_params=self.offload_params)
        except ValueError:
            self.errors["offload_params"] = _("Offloading parameters needs ZeRO-3 / FULL_SHARD.")
            return None

    @property
    def card_bytes(self) -> float | None:
        try:
            value = float(self.card_gb)
        except ValueError:
            return None
        return value * GB if 0 < value < 1e6 else None


@bp.route("/")
def index():
    """The calculator: the chosen setup in detail, and every ZeRO stage side by side."""
    form = Form.from_args()
    if form.card_bytes is None:
        form.errors["card_gb"] = _("Card memory must be a positive number of GB.")
    setup = form.setup()
    result = estimate(setup) if setup else None
    compare, chart = [], None
    if setup:
        for stage in range(4):
            alt = form.setup(f"zero{stage}") if not (form.offload_params and stage < 3) else None
            if alt:
                compare.append((stage, estimate(alt)))
        card = form.card_bytes
        chart = bar_chart(_("Model states per card (GB)"),
                          {f"ZeRO-{s}": round(e.total_bytes / GB, 2) for s, e in compare},
                          x_title=_("ZeRO stage"), y_title=_("GB per card"),
                          line=(card / GB, _("card: %(gb)s GB", gb=f"{card / GB:g}")) if card else None)
    return render_template("calculator/index.html", form=form, result=result, compare=compare, chart=chart,
                           GB=GB, GIB=GIB, lang=lang_key(), strategies=STRATEGIES,
                           precisions=[p.value for p in Precision], optimizers=[o.value for o in Optimizer],
                           optimizer_names={"adam": "Adam", "adamw": "AdamW", "sgd_momentum": _("SGD with momentum"),
                                            "sgd": _("SGD (no momentum)")})
