"""Earned trust: when a reader's verdict on a free-text answer may count without a teacher.

A *reader* is anything that reads a free-text answer and suggests a share of its points: the
rule reader (``coursework.quiz.rubric`` for the quiz, ``coursework.config_annotation.annotate``
for homework 2's notes) or a language model (``coursework.llm_reader``). Every teacher decision
on an answer (a grouped review, an "ask the teacher", a sample confirmed) is a *label*: the
answer, the points the teacher gave, and what each reader had suggested. Labels are kept per
question (or per annotated field), not per course, so they outlive a term.

The rule (``TrustRule``), per reader and question/field, over its labels:

- at least ``min_decided`` (30) decided answers, so that one lucky week does not earn it;
- agreement (the reader's share within ``tolerance`` of the teacher's) on at least
  ``min_agreement`` (97%) of them; with 30 labels that allows no disagreement at all (29/30 is
  96.7%), with 100 it allows three;
- and never, in any label, full marks suggested where the teacher gave 0: one such answer
  withdraws trust on that item for good (a wrong answer in the right words is the failure this
  whole scheme exists to stop; agreement elsewhere does not buy it back).

Trust is earned **per kind of verdict** (``KINDS``: full, partial, zero), in both directions: a
reader's "full" counts only where its full suggestions agreed with the teachers, and its "zero"
(or partial) only where its zero (partial) suggestions did (``tally_kinds``). A reader that is
right on every good answer but fails one right answer in three earns "full" and never "zero", so
a right note is never told at once that it is wrong. The symmetric veto holds for "zero": one
zero suggested where a teacher gave full marks withdraws "zero" for good (a right answer in
unfamiliar words is the mirror image of a wrong one in the right words).

Where the rule is not met, the reader's verdict is *provisional*: shown to the student at once,
counted only when a teacher confirms (or, if the course chooses, counted and marked
unconfirmed). Pure functions: the web app keeps the labels, this module only judges them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

RULE_READER = "rule"
LLM_READER = "llm"


@dataclass(frozen=True)
class TrustRule:
    """When agreement is enough (see the module docstring for why these numbers)."""

    min_decided: int = 30
    min_agreement: float = 0.97
    tolerance: float = 0.01  # shares of the question's points: 0.5 and 0.505 agree


DEFAULT_RULE = TrustRule()


def agrees(suggested: float | None, decided: float, rule: TrustRule = DEFAULT_RULE) -> bool:
    """Did the reader suggest what the teacher gave (both as shares of the points)? A reader that
    gave no reading (a timeout, a malformed reply) did not agree."""
    return suggested is not None and abs(suggested - decided) <= rule.tolerance


def full_to_zero(suggested: float | None, decided: float) -> bool:
    """Full marks suggested for an answer the teacher scored 0: the error trust never survives."""
    return suggested is not None and suggested >= 1 - 1e-9 and decided <= 1e-9


def zero_to_full(suggested: float | None, decided: float) -> bool:
    """Nothing suggested for an answer the teacher gave full marks: what withdraws "zero" trust."""
    return suggested is not None and suggested <= 1e-9 and decided >= 1 - 1e-9


FULL, PARTIAL, ZERO = "full", "partial", "zero"
KINDS = (FULL, PARTIAL, ZERO)


def kind_of(share: float, rule: "TrustRule | None" = None) -> str:
    """The kind of a suggested share: full marks, nothing, or something between."""
    tol = (rule or DEFAULT_RULE).tolerance
    if share >= 1 - tol:
        return FULL
    if share <= tol:
        return ZERO
    return PARTIAL


@dataclass
class Agreement:
    """One reader on one question or field, over the labels it has."""

    reader: str
    item: str
    decided: int = 0
    agreed: int = 0
    full_to_zero: int = 0
    zero_to_full: int = 0  # counted in the "zero" kind's agreement, where it withdraws trust
    kind: str | None = None  # None: every label; else only the labels where the reader suggested this kind
    no_reading: int = 0  # labels where this reader had nothing to say (not configured, failed)

    @property
    def share(self) -> float | None:
        return self.agreed / self.decided if self.decided else None

    def earned(self, rule: TrustRule = DEFAULT_RULE) -> bool:
        """Whether this reader's verdicts on this item count without a teacher."""
        return (self.decided >= rule.min_decided and self.full_to_zero == 0 and self._zero_veto() == 0
                and self.agreed >= rule.min_agreement * self.decided - 1e-9)

    def _zero_veto(self) -> int:
        """Zero-to-full labels withdraw "zero" trust; the all-labels agreement keeps its old rule."""
        return self.zero_to_full if self.kind == ZERO else 0

    def needed(self, rule: TrustRule = DEFAULT_RULE) -> int:
        """More agreeing decisions needed before trust could be earned (0: earned or blocked)."""
        if self.full_to_zero or self._zero_veto():
            return 0
        n = max(rule.min_decided - self.decided, 0)
        while (self.agreed + n) < rule.min_agreement * (self.decided + n) - 1e-9:
            n += 1
        return n


def tally(reader: str, item: str, labels: Iterable[tuple[float | None, float]],
          rule: TrustRule = DEFAULT_RULE) -> Agreement:
    """``Agreement`` of ``reader`` on ``item`` from (suggested share, teacher's share) pairs."""
    a = Agreement(reader, item)
    for suggested, decided in labels:
        if suggested is None:
            a.no_reading += 1
            continue
        a.decided += 1
        a.agreed += agrees(suggested, decided, rule)
        a.full_to_zero += full_to_zero(suggested, decided)
        a.zero_to_full += zero_to_full(suggested, decided)
    return a


def tally_kinds(reader: str, item: str, labels: Iterable[tuple[float | None, float]],
                rule: TrustRule = DEFAULT_RULE) -> dict[str, Agreement]:
    """One ``Agreement`` per kind of suggestion (full / partial / zero), each over the labels where
    ``reader`` suggested that kind: what decides whether a verdict of that kind counts."""
    by_kind: dict[str, list[tuple[float | None, float]]] = {k: [] for k in KINDS}
    for suggested, decided in labels:
        if suggested is not None:
            by_kind[kind_of(suggested, rule)].append((suggested, decided))
    out = {}
    for k, pairs in by_kind.items():
        out[k] = tally(reader, item, pairs, rule)
        out[k].kind = k
    return out


def lowest(readings: dict[str, float | None]) -> float | None:
    """The most cautious suggestion among the readers that gave one (what ``combined`` returns)."""
    got = [v for v in readings.values() if v is not None]
    return min(got) if got else None


def combined(readings: dict[str, float | None], trusted: set[str]) -> tuple[float | None, str]:
    """What counts from several readers' suggestions, and why: ``("counted", share)`` when every
    reader that read the answer agrees and at least one of them earned trust (for the kind of that
    share: the caller passes the readers trusted for ``kind_of(lowest(readings))``); otherwise the answer
    is provisional with the most cautious suggestion (readers that disagree: the teacher decides).

    A reader that was asked and gave no reading (None: a timeout, a malformed reply) keeps the
    answer provisional too. Returns (share or None, reason) with reason ``trusted`` |
    ``untrusted`` | ``disagree`` | ``no_reading``.
    """
    got = {r: v for r, v in readings.items() if v is not None}
    if not got:
        return None, "no_reading"
    low = min(got.values())
    if len(got) < len(readings):
        return low, "no_reading"  # a configured reader failed (timeout, malformed reply): the teacher decides
    if max(got.values()) - low > DEFAULT_RULE.tolerance:
        return low, "disagree"
    if any(r in trusted for r in got):
        return low, "trusted"
    return low, "untrusted"
