"""Short-text grading by a rubric of concepts bound to subjects, in Chinese or English.

Keyword spotting would give full marks to "data parallel solves capacity, model parallel
solves throughput". Instead each rubric item says *which subject* a concept must be said of:

1. The answer is cut into sentences (。；;. newline) and clauses (，, 而 but whereas " and ").
2. A clause that names no subject continues the previous clause's subject ("DDP copies the
   model, then averages gradients").
3. An item is met when its subject and its concept share a clause (or a sentence, for items
   with ``scope: sentence``), and the concept is not negated ("not", "不", "没" just before).
4. An item whose subject is bound to one of its ``wrong`` concepts is *confused*: zero points
   and feedback that names the mix-up, even if the right concept also appears.
5. "A and B address X and Y respectively / 分别" pairs subjects and concepts by order.
6. A very short answer with no subjects ("吞吐/容量") is read in the question's order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from graders.quiz.result import FormatError, Text

MAX_TEXT_CHARS = 2000
SHORTHAND_MAX_CHARS = 60
_SENTENCE_SPLIT = re.compile(r"[。；;!?！？\n]+|\.(?:\s+|$)")
_CLAUSE_SPLIT = re.compile(r"[，,、：:]+|\s+(?:and|but|whereas|while|whilst|then)\s+|而|但是|但|然后|并且|同时")
_NEG_EN = re.compile(r"(?<![a-z])(?:not|no|never|without|neither|nor|cannot)(?![a-z])|n't", re.I)
_NEG_ZH = re.compile(r"不(?!仅|但|同|论|管)|没|无(?!论)|非(?!常)|未(?!来)|别(?<=[^分区类个特差]别)")
_RESPECTIVELY = re.compile(r"respectively|分别|各自")
NEG_WINDOW_ZH = 4
NEG_WINDOW_EN_WORDS = 3


@lru_cache(maxsize=4096)
def _synonym_regex(term: str) -> re.Pattern[str]:
    """A synonym as a pattern: spaces/hyphens/underscores optional, word start for Latin terms."""
    parts = [re.escape(p) for p in term.lower().split()]
    body = r"[\s\-_]*".join(parts)
    prefix = r"(?<![a-z])" if term[:1].isascii() and term[:1].isalpha() else ""
    return re.compile(prefix + body)


def normalise(text: str) -> str:
    """Lower case, unify quotes and full-width spaces; keep punctuation for splitting."""
    return text.lower().replace("’", "'").replace("　", " ").replace("＝", "=")


def _negated(clause: str, start: int) -> bool:
    before = clause[:start]
    zh_window = before[-NEG_WINDOW_ZH:]
    if _NEG_ZH.search(zh_window):
        return True
    words = re.findall(r"[a-z']+", before)[-NEG_WINDOW_EN_WORDS:]
    return bool(_NEG_EN.search(" ".join(words)))


def find(terms: list[str], text: str, check_negation: bool = True) -> int | None:
    """Position of the first non-negated mention of any term (``a+b``: all parts, any order)."""
    best: int | None = None
    for term in terms:
        positions = []
        for part in term.split("+"):
            hit = None
            for m in _synonym_regex(part.strip()).finditer(text):
                if not check_negation or not _negated(text, m.start()):
                    hit = m.start()
                    break
            if hit is None:
                break
            positions.append(hit)
        else:
            pos = min(positions)
            best = pos if best is None else min(best, pos)
    return best


@dataclass
class RubricItem:
    """One required concept, optionally bound to a subject."""

    id: str
    concept: list[str]
    points: float = 1.0
    subject: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    scope: str = "clause"  # clause | sentence | answer
    order: int | None = None  # position in a shorthand answer ("吞吐/容量")
    negation: str = "absent"  # absent: a negated concept does not count; ignore: it does
    missing: Text = field(default_factory=dict)
    confused: Text = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RubricItem":
        return cls(**d)


@dataclass
class Segment:
    text: str
    subjects: set[str]  # item ids whose subject this clause is about (named or inherited)


def split_answer(text: str, items: list[RubricItem]) -> list[list[Segment]]:
    """Sentences of clauses, each clause tagged with the subjects it talks about."""
    sentences: list[list[Segment]] = []
    previous: set[str] = set()
    for sentence in _SENTENCE_SPLIT.split(text):
        clauses = []
        for clause in _CLAUSE_SPLIT.split(sentence):
            if not clause.strip():
                continue
            named = {it.id for it in items if it.subject and find(it.subject, clause, check_negation=False) is not None}
            subjects = named or previous
            clauses.append(Segment(clause, subjects))
            previous = subjects
        if clauses:
            sentences.append(clauses)
    return sentences


def validate_text(raw: str) -> str:
    """Reject empty, oversized or letter-free answers before grading."""
    text = (raw or "").strip()
    if not text:
        raise FormatError({"zh": "请写下你的答案。", "en": "Please write an answer."}, "empty")
    if len(text) > MAX_TEXT_CHARS:
        raise FormatError({"zh": f"答案过长（上限 {MAX_TEXT_CHARS} 字符），请简要作答。",
                           "en": f"Answer too long (limit {MAX_TEXT_CHARS} characters); keep it short."}, "too_long")
    if not re.search(r"[a-zA-Z\u4e00-\u9fff]", text):
        raise FormatError({"zh": "答案里没有文字。", "en": "The answer contains no words."}, "no_words")
    return text


def evaluate(raw: str, items: list[RubricItem]) -> dict[str, Any]:
    """Which items are met, missing or confused; raises FormatError for unreadable input."""
    text = normalise(validate_text(raw))
    sentences = split_answer(text, items)
    met: set[str] = set()
    confused: set[str] = set()
    for it in items:
        check = it.negation != "ignore"
        if not it.subject:
            if find(it.concept, text, check) is not None:
                met.add(it.id)
            continue
        for sentence in sentences:
            if _RESPECTIVELY.search(" ".join(seg.text for seg in sentence)):
                continue  # paired by order in _pair_respectively
            for seg in sentence:
                if it.id in seg.subjects and it.wrong and find(it.wrong, seg.text) is not None:
                    confused.add(it.id)
                if it.id in seg.subjects and find(it.concept, seg.text, check) is not None:
                    met.add(it.id)
            if it.scope == "sentence":
                joined = " , ".join(s.text for s in sentence)
                if find(it.subject, joined, False) is not None and find(it.concept, joined, check) is not None:
                    met.add(it.id)
    _pair_respectively(sentences, items, met, confused)
    _read_shorthand(text, items, met, confused)
    met -= confused
    return {"met": sorted(met), "confused": sorted(confused),
            "missing": [it.id for it in items if it.id not in met and it.id not in confused]}


def _pair_respectively(sentences: list[list[Segment]], items: list[RubricItem], met: set[str],
                       confused: set[str]) -> None:
    """"A and B solve X and Y respectively": pair subjects and concepts by their order."""
    for sentence in sentences:
        joined = " , ".join(s.text for s in sentence)
        if not _RESPECTIVELY.search(joined):
            continue
        found = []
        for it in items:
            s, c = (find(it.subject, joined, False) if it.subject else None), find(it.concept, joined)
            if s is not None and c is not None:
                found.append((s, c, it.id))
        if len(found) < 2:
            continue
        by_subject = [i for _, _, i in sorted(found)]
        by_concept = [i for _, _, i in sorted(found, key=lambda t: t[1])]
        target = met if by_subject == by_concept else confused
        target.update(by_subject)
        if by_subject != by_concept:
            met.difference_update(by_subject)


def _read_shorthand(text: str, items: list[RubricItem], met: set[str], confused: set[str]) -> None:
    """A short answer that lists the concepts in the question's order ("吞吐/容量")."""
    ordered = sorted((it for it in items if it.order is not None), key=lambda it: it.order or 0)
    if len(ordered) < 2 or len(text) > SHORTHAND_MAX_CHARS or confused:
        return
    if any(it.id in met for it in ordered):
        return  # the answer already binds subjects; do not read it a second way
    positions = [find(it.concept, text) for it in ordered]
    if all(p is not None for p in positions) and positions == sorted(positions):
        met.update(it.id for it in ordered)


def grade_text(raw: str, items: list[RubricItem]) -> tuple[float, list[Text], dict[str, Any]]:
    """Fraction of rubric points earned, feedback naming what is missing or mixed up, details."""
    outcome = evaluate(raw, items)
    total = sum(it.points for it in items) or 1.0
    earned = sum(it.points for it in items if it.id in outcome["met"])
    feedback: list[Text] = []
    for it in items:
        if it.id in outcome["confused"]:
            feedback.append(it.confused or {"zh": f"混淆：{it.id}", "en": f"Mixed up: {it.id}"})
        elif it.id in outcome["missing"]:
            feedback.append(it.missing or {"zh": f"缺少：{it.id}", "en": f"Missing: {it.id}"})
    return earned / total, feedback, outcome
