"""How many decisions a teacher makes for a 200-student class: the graded self-test's free text
and homework 2's notes, in a first term and in a second term that keeps the first term's decisions.

``python -m bench.review_load [--students 200] [--seed 1] [--distinct] [--rule symmetric|asymmetric]``.
Nothing runs on a server: the same
functions the service uses read and group the answers (the rule reader, ``review.group_key``,
``review_annotation.group_key``, ``coursework.trust``, ``coursework.review_sampling``).

The class is simulated by resampling the project's labelled answers: each student answers each of
the graded quiz's four free-text questions with an answer drawn (with replacement) from that
question's ``examples.json``, and writes homework 2's notes for 13 fields of one config dialect
(the blind batches hold 205 graded notes in 16 configs) drawn from ``annotation_examples.json``.
The label of each example is the fair teacher's share (full 1, zero 0, partial its ``score`` or
0.5 for notes).

What the teacher does, as the review pages let them:
- A group of up to 29 answers is read whole; one key decides it, unless its answers deserve
  different shares: then one decision per distinct share (the teacher unticks the others).
- A larger group: the teacher reads a random sample of 29. If every sampled answer deserves
  the same share, one key confirms it and the rest settle; the settled answers that deserved
  another share are counted as **settled wrongly** (the price of sampling, reported). If the
  sample is mixed, the teacher reads the whole group (one decision per distinct share).
- Second term: an answer whose text a teacher already decided gets that decision (``known``;
  texts compared as the service does, ``server.quiz.labels.same_claim``); a question or field
  whose reader earned trust on the first term's labels counts its verdicts (``trusted``), which
  can be wrong: counted above the teacher's share is reported.

Caveat: the pools are small (about 55 answers per question), so a resampled class repeats first
term answers far more often than a real one would; "term 2, no text reuse" shows the same term
without the exact-text shortcut, the honest lower bound on the savings.

``--distinct``: only distinct answers, the way a real class writes (paraphrases, never copies).
Each question's (field's) labelled answers are deduplicated by normalised text, shuffled and cut
in two: the first half is term 1, the second term 2, so no term-2 answer was seen in term 1. The
pools hold far fewer than 200 students, so decisions are reported **per 200 students** by scaling
decisions per answer (four free-text answers, or 13 notes, per student): an upper bound, since a
larger class puts more answers in each group.

The rule: ``symmetric`` (shipped) counts a verdict at once only where the reader earned trust on
that item for verdicts of its kind (``coursework.trust.kind_of``: full, partial, zero);
``asymmetric`` is the rule before it, for comparison: a note read as worth nothing counted its 0
at once. "counted below" is answers counted under the teacher's share without a teacher (a right
answer told it is wrong), "counted above" the reverse.
"""
from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from coursework import trust
from coursework.config_annotation import annotate, catalogue
from coursework.quiz.bank import load_question, load_quiz
from coursework.quiz.grading import grade
from coursework.review_sampling import READ_ALL_UP_TO, sample
from server.quiz.labels import normalised, same_claim

FIELDS_PER_CONFIG = 13


@dataclass
class Answer:
    item: str  # question id or annotation item (dialect:field)
    text: str
    truth: float  # the fair teacher's share
    suggested: float  # the rule reader's share
    unsure: bool
    key: str  # review group key
    empty: bool = False  # no note at all: nothing for a reader to guess, its 0 counts under any rule


@dataclass
class Tally:
    decisions: int = 0
    read: int = 0
    known: int = 0
    trusted: int = 0
    settled: int = 0
    settled_wrongly: int = 0
    counted_above: int = 0
    counted_below: int = 0
    answers: int = 0
    labels: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # item -> text -> (suggested, decided)


def _share(e: dict[str, Any]) -> float:
    expect = e["expect"]
    if expect in ("full", "correct"):
        return 1.0
    if expect in ("zero", "wrong"):
        return 0.0
    return float(e.get("score", 0.5))


def _quiz_pool() -> dict[str, list[dict[str, Any]]]:
    """Each graded free-text question's labelled answers."""
    out = {}
    for qid in [q for q in load_quiz("ch7_3_graded").question_ids if load_question(q).type == "text"]:
        out[qid] = [e for e in load_question(qid).examples if e["expect"] in ("full", "partial", "zero")]
    return out


def quiz_answer(qid: str, e: dict[str, Any]) -> Answer:
    """One labelled quiz answer as the service reads and groups it."""
    from server.quiz.review import group_key

    q = load_question(qid)
    r = grade(q, e.get("seed", 1), e["answer"])
    return Answer(qid, e["answer"], _share(e), r.provisional_fraction, r.needs_review,
                  qid + group_key(qid, e["answer"], r.details))


def quiz_answers(rng: random.Random, students: int) -> list[Answer]:
    return [quiz_answer(qid, rng.choice(pool)) for qid, pool in _quiz_pool().items() for _ in range(students)]


def _note_pool() -> dict[str, list[dict[str, Any]]]:
    """``dialect:field`` -> homework 2's labelled notes on it."""
    pool: dict[str, list[dict]] = defaultdict(list)
    for e in json.loads((catalogue.DEFAULT_PATH.parent / "annotation_examples.json").read_text("utf-8")):
        pool[f"{e['dialect']}:{e['field']}"].append(e)
    return pool


def note_answer(cat: catalogue.Catalogue, e: dict[str, Any]) -> Answer:
    """One labelled note as the service reads and groups it."""
    from server.dashboard.review_annotation import Pending, group_key

    d, f = e["dialect"], e["field"]
    value = cat.field_value(d, f, e["value"])
    j = annotate.judge(e["answer"], cat.rule(d, f, value), cat)
    p = Pending(0, 0, "", f"field.{f}", d, f, value, e["answer"], {}, j.verdict.value, j.fraction, 1.0,
                j.confidence, {"missing": j.missing, "wrong": j.wrong})
    return Answer(f"annotation:{d}:{f}", e["answer"], _share(e), j.fraction, j.needs_review, group_key(p),
                  j.verdict == annotate.Verdict.MISSING)


def note_answers(rng: random.Random, students: int) -> list[Answer]:
    cat = catalogue.load()
    pool: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for item, examples in _note_pool().items():
        for e in examples:
            pool[e["dialect"]][e["field"]].append(e)
    dialects = sorted(pool)
    out = []
    for _ in range(students):
        d = rng.choice(dialects)
        fields = sorted(pool[d])
        for f in rng.sample(fields, min(FIELDS_PER_CONFIG, len(fields))):
            out.append(note_answer(cat, rng.choice(pool[d][f])))
    return out


def distinct_terms(pool: dict[str, list[dict[str, Any]]], make, rng: random.Random) -> tuple[list[Answer], list[Answer]]:
    """(term 1, term 2): each item's distinct answers (by normalised text), shuffled and halved."""
    first, second = [], []
    for item in sorted(pool):
        seen: dict[str, dict] = {}
        for e in pool[item]:
            seen.setdefault(normalised(e["answer"]), e)
        texts = sorted(seen)
        rng.shuffle(texts)
        half = len(texts) // 2
        first += [make(item, seen[t]) for t in texts[:half]]
        second += [make(item, seen[t]) for t in texts[half:]]
    return first, second


def trusted_kinds(previous: dict[str, dict[str, tuple[float, float]]]) -> set[tuple[str, str]]:
    """(item, kind) where the rule reader earned trust on the previous term's labels."""
    out = set()
    for item, texts in previous.items():
        for kind, a in trust.tally_kinds(trust.RULE_READER, item, list(texts.values())).items():
            if a.earned():
                out.add((item, kind))
    return out


def review(answers: list[Answer], rng: random.Random, previous: dict[str, dict[str, tuple[float, float]]] | None,
           reuse_text: bool = True, rule: str = "symmetric") -> Tally:
    """The teacher's work on one term's answers, given the labels kept from the previous term."""
    t = Tally(answers=len(answers))
    previous = previous or {}
    trusted = trusted_kinds(previous)

    def counted(a: Answer, share: float) -> None:
        t.counted_above += share > a.truth + 0.01
        t.counted_below += share < a.truth - 0.01

    waiting: dict[str, list[Answer]] = defaultdict(list)
    for a in answers:
        known = previous.get(a.item, {}).get(same_claim(a.text)) if reuse_text else None
        if known is not None:
            t.known += 1
            counted(a, known[1])
            continue
        if a.empty or rule == "asymmetric" and a.item.startswith("annotation:") and a.suggested <= 0 and not a.unsure:
            t.trusted += 1  # counted at once without a teacher (the old rule's zeros; no note at all)
            counted(a, a.suggested)
            continue
        if (a.item, trust.kind_of(a.suggested)) in trusted and not a.unsure:
            t.trusted += 1
            counted(a, a.suggested)
            continue
        waiting[a.key].append(a)
    labels: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)

    def decide_all(group: list[Answer]) -> None:
        t.decisions += len({round(a.truth, 2) for a in group})
        t.read += len(group)
        for a in group:
            labels[a.item][same_claim(a.text)] = (a.suggested, a.truth)

    for key, group in sorted(waiting.items(), key=lambda kv: -len(kv[1])):  # largest groups first
        if len(group) <= READ_ALL_UP_TO:
            decide_all(group)
            continue
        sampled = sample(group, key + str(rng.random()))
        shares = {round(a.truth, 2) for a in sampled}
        if len(shares) > 1:
            decide_all(group)
            continue
        t.decisions += 1
        t.read += len(sampled)
        for a in sampled:
            labels[a.item][same_claim(a.text)] = (a.suggested, a.truth)
        rest = [a for a in group if a not in sampled]
        t.settled += len(rest)
        t.settled_wrongly += sum(abs(a.truth - sampled[0].truth) > 0.01 for a in rest)
    merged = {k: dict(v) for k, v in previous.items()}
    for item, texts in labels.items():
        merged.setdefault(item, {}).update(texts)
    t.labels = merged
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--distinct", action="store_true", help="only distinct answers, halved into two terms")
    ap.add_argument("--rule", choices=("symmetric", "asymmetric"), default="symmetric")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"{'distinct answers' if args.distinct else f'{args.students} students'}; rule {args.rule}; a group of up "
          f"to {READ_ALL_UP_TO} is read whole, a larger one from a sample of {READ_ALL_UP_TO}; trust: {trust.DEFAULT_RULE}")
    header = (f"{'':34} {'answers':>7} {'decisions':>9} {'per 200 st.':>11} {'read':>6} {'known':>6} {'trusted':>7} "
              f"{'settled':>7} {'settled wrongly':>15} {'counted above':>13} {'counted below':>13}")
    print(header)
    cat = catalogue.load()
    makers = (("graded self-test (4 free-text q.)", quiz_answers, _quiz_pool, quiz_answer, 4),
              ("homework 2 notes", note_answers, _note_pool, lambda _item, e: note_answer(cat, e), FIELDS_PER_CONFIG))
    for name, make, pool, one, per_student in makers:
        if args.distinct:
            term1, term2 = distinct_terms(pool(), one, rng)
        else:
            term1, term2 = make(rng, args.students), make(rng, args.students)
        first = review(term1, rng, None, rule=args.rule)
        rows = [("term 1", first), ("term 2, term 1 kept", review(term2, rng, first.labels, rule=args.rule))]
        if not args.distinct:  # distinct terms share no text: the exact-text shortcut never applies
            rows.append(("term 2, no text reuse", review(term2, rng, first.labels, reuse_text=False, rule=args.rule)))
        print(name)
        for label, t in rows:
            per200 = t.decisions * 200 * per_student / t.answers if t.answers else 0.0
            print(f"  {label:32} {t.answers:7d} {t.decisions:9d} {per200:11.0f} {t.read:6d} {t.known:6d} {t.trusted:7d} "
                  f"{t.settled:7d} {t.settled_wrongly:15d} {t.counted_above:13d} {t.counted_below:13d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
