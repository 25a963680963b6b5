"""The rubric's shortcuts read every answer exactly as the plain definitions do:

* ``hedged``: one pattern of all English hedges finds a hedge where some hedge's own pattern does;
* ``Term.first_word``: a term's first part never matches a text without that word, so ``_hits``
  may skip such terms (and gives what trying every term behind the old pre-filter gave);
* trades are read only for rubrics with a ``role``; others never used them.

The answers are every question's example answers and references, in both languages, plus
sentences written to sit on the edges (a hedge inside a longer word, a term in a dotted name).
"""
from __future__ import annotations

import re

import pytest

from coursework.quiz import rubric
from coursework.quiz import textmatch as tm
from coursework.quiz.bank import all_question_ids, load_question
from coursework.quiz.grading import make_variant

TEXT = [q for q in all_question_ids() if load_question(q).type == "text"]
EDGES = ["maybe the sampler", "maybelline is not a hedge", "perhapsnot", "it is perhaps?", "i think so",
         "sampler.set_epoch(e) every epoch", "data-parallel_sharding", "zero 1 / zero 2 / zero 3", "不确定, 可能是吧",
         "DP for throughput; MP for capacity", "offload trades gpu memory for speed", "用显存换速度"]


def _texts(qid: str) -> list[str]:
    q = load_question(qid)
    out = [e["answer"] for e in q.examples if isinstance(e.get("answer"), str)]
    for seed in range(0, 60, 11):
        v = make_variant(q, seed)
        out += [v.reference("en"), v.reference("zh")]
    return [tm.normalise(t) for t in out + EDGES]


def _clauses(text: str) -> list[str]:
    return [c for clauses in tm.split(text) for c in clauses] + [text]


def _old_hedged(text: str) -> bool:
    lex = tm.lexicon()["hedges"]
    return any(re.search(r"(?<![a-z])" + re.escape(w) + r"(?![a-z])", text) for w in lex["en"]) or \
        any(w in text for w in lex["zh"]) or "?" in text


def _old_hits(terms, text, post=True):
    return [h for t in terms for h in tm.hits(t, text, post)] if rubric._any_of(terms).search(text) else []


@pytest.mark.parametrize("qid", TEXT)
def test_one_hedge_pattern_finds_what_the_hedges_one_by_one_find(qid: str) -> None:
    texts = _texts(qid)
    assert any(tm.hedged(t) for t in texts) and not all(tm.hedged(t) for t in texts)
    for t in texts:
        assert tm.hedged(t) == _old_hedged(t), t


@pytest.mark.parametrize("qid", TEXT)
def test_hits_skip_only_terms_that_cannot_match(qid: str) -> None:
    rub = rubric.compile_rubric(load_question(qid).info["rubric"])
    lists = [terms for it in rub.items for terms in (it.concept_terms, it.subject_terms, it.wrong_terms)]
    found = 0
    for text in _texts(qid):
        for clause in _clauses(text):
            for t in rub.all_terms:
                if t.parts[0].search(clause):
                    assert t.first_word in clause, (t.raw, clause)
            for terms in lists:
                for post in (True, False):
                    new = rubric._hits(terms, clause, post)
                    assert [(h.start, h.end, h.negated) for h in new] == \
                        [(h.start, h.end, h.negated) for h in _old_hits(terms, clause, post)], (clause, post)
                    found += bool(new)
            assert rubric._knows_any(rub.all_terms, clause) == bool(rubric._any_of(rub.all_terms).search(clause))
    assert found  # the answers do hit terms: the comparison is not vacuous


def test_trades_are_read_for_rubrics_with_a_role_and_only_there() -> None:
    with_role = [q for q in TEXT if any(d.get("role") for d in load_question(q).info["rubric"]["items"])]
    assert with_role and len(with_role) < len(TEXT)
    for qid in TEXT:
        rub = rubric.compile_rubric(load_question(qid).info["rubric"])
        for text in _texts(qid):
            segs, _ = rubric._segments(text, rub.items)
            for seg in segs:
                assert seg.trade == (tm.trade_spans(seg.text) if qid in with_role else [])
