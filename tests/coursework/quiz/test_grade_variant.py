"""``grade_variant`` (what the answer post uses, on the variant the web app keeps per process)
gives exactly ``grade``'s result for every question, and grading never changes the variant it
was given (that variant is shared by every later request for the same seed)."""
from __future__ import annotations

import copy

import pytest

from coursework.quiz.bank import all_question_ids, load_question
from coursework.quiz.grading import grade, grade_variant, make_variant

QUESTIONS = all_question_ids()
SEEDS = range(0, 120, 17)


def _answers(v) -> list[str]:
    q = v.question
    out = [v.reference("en"), v.reference("zh"), *v.accept, *v.reject, "", "12 parsecs", "1, 2"]
    out += [e["answer"] for e in q.examples if isinstance(e.get("answer"), str)]
    return out


def _fields(r) -> tuple:
    return r.status, r.score, r.max_score, r.feedback, r.details


@pytest.mark.parametrize("qid", QUESTIONS)
def test_grade_variant_gives_grades_result_and_leaves_the_variant_unchanged(qid: str) -> None:
    q = load_question(qid)
    for seed in SEEDS:
        shared = make_variant(q, seed)
        before = copy.deepcopy((shared.params, shared.answer, shared.accept, shared.reject, shared.option_order))
        for raw in _answers(shared):
            assert _fields(grade_variant(shared, raw)) == _fields(grade(q, seed, raw)), (qid, seed, raw)
        assert (shared.params, shared.answer, shared.accept, shared.reject, shared.option_order) == before, qid
