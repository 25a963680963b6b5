"""Every question checks itself: many seeds, reference answers, known wrong answers, malformed input,
and the table of graded example answers that ships beside each question (``examples.json``)."""
from __future__ import annotations

import math
import re

import pytest

from coursework.quiz import agreement
from coursework.quiz.bank import all_question_ids, all_quiz_ids, load_question, load_quiz, sections
from coursework.quiz.grading import REVIEW_NOTE, grade, make_variant
from coursework.quiz.result import AnswerStatus

QUESTIONS = all_question_ids()
SEEDS = range(0, 400, 7)  # 58 seeds per question


def test_bank_is_big_enough_and_covers_every_section() -> None:
    assert len(QUESTIONS) >= 30
    covered = {load_question(q).section for q in QUESTIONS}
    assert {"1", "2", "3", "4", "5", "6"} <= covered
    for n in range(1, 7):
        assert f"ch7_3/selftest_{n}" in QUESTIONS
    assert set(sections()) >= covered


@pytest.mark.parametrize("qid", QUESTIONS)
def test_metadata_is_bilingual(qid: str) -> None:
    q = load_question(qid)
    for key in ("title", "prompt", "explanation"):
        assert q.info[key]["zh"] and q.info[key]["en"], f"{qid}: {key} needs zh and en"
    assert q.info["topic"] and q.info["tags"] and q.points > 0 and q.section


@pytest.mark.parametrize("qid", QUESTIONS)
def test_reference_scores_full_and_known_wrong_scores_zero(qid: str) -> None:
    q = load_question(qid)
    for seed in SEEDS:
        v = make_variant(q, seed)
        for lang in ("zh", "en"):
            ref = v.reference(lang)
            r = grade(q, seed, ref)
            assert r.correct, f"{qid} seed {seed} {lang}: reference {ref!r} scored {r.score}: {r.feedback}"
        for right in v.accept:
            assert grade(q, seed, right).correct, f"{qid} seed {seed}: {right!r} should be accepted"
        for wrong in v.reject:
            r = grade(q, seed, wrong)
            assert r.status == AnswerStatus.GRADED and r.score == 0, f"{qid} seed {seed}: {wrong!r} scored {r.score}"


@pytest.mark.parametrize("qid", QUESTIONS)
def test_variants_are_reproducible(qid: str) -> None:
    q = load_question(qid)
    a, b = make_variant(q, 12345), make_variant(q, 12345)
    assert (a.params, a.answer, a.option_order) == (b.params, b.answer, b.option_order)


@pytest.mark.parametrize("qid", QUESTIONS)
@pytest.mark.parametrize("bad", ["", "   ", "x" * 10_000, "NaN", "nan GB", "1e999 GB", "12 parsecs"])
def test_malformed_input_is_a_format_error(qid: str, bad: str) -> None:
    q = load_question(qid)
    r = grade(q, 1, bad)
    if q.type == "text" and bad in ("NaN", "nan GB", "1e999 GB", "12 parsecs"):
        assert r.status == AnswerStatus.GRADED and r.score == 0  # words, just wrong ones
        return
    assert r.status == AnswerStatus.FORMAT_ERROR, f"{qid}: {bad[:20]!r} -> {r}"
    assert r.score == 0 and r.feedback and r.feedback[0]["zh"] and r.feedback[0]["en"]


def _examples(split: str | None = None) -> list[tuple[str, int, dict]]:
    return [(qid, i, e) for qid in QUESTIONS for i, e in enumerate(load_question(qid).examples)
            if split is None or e.get("split", "tune") == split]


@pytest.mark.parametrize("qid,index,example", _examples("tune"), ids=lambda v: v if isinstance(v, str) else "")
def test_graded_example_answers(qid: str, index: int, example: dict) -> None:
    """Every tuning example graded at once gets the teacher's verdict; one the rubric is unsure
    of waits for the teacher (scores nothing yet) and says so. Held-out examples are measured
    together in ``test_answer_sets_meet_the_targets`` and never tuned one by one."""
    q = load_question(qid)
    seed = example.get("seed", 1)
    r = grade(q, seed, example["answer"])
    expect = example["expect"]
    where = f"{qid} example {index} {example['answer'][:60]!r} ({example.get('note', '')}): {r.score}/{r.max_score} {r.details}"
    if expect == "format_error":
        assert r.status == AnswerStatus.FORMAT_ERROR, where
        return
    if r.status == AnswerStatus.NEEDS_REVIEW:
        assert r.score == 0 and r.feedback[0] == REVIEW_NOTE, where
        return
    assert r.status == AnswerStatus.GRADED, where
    if expect == "full":
        assert r.correct, where
    elif expect == "zero":
        assert r.score == 0, where
    else:
        assert 0 < r.score < r.max_score, where
        assert r.feedback, where
        if "score" in example:
            assert math.isclose(r.fraction, example["score"], abs_tol=0.01), where


TEXT_QUESTIONS = [q for q in QUESTIONS if load_question(q).type == "text"]


@pytest.mark.parametrize("qid", TEXT_QUESTIONS)
def test_every_free_text_question_has_a_bilingual_answer_set_with_a_held_out_part(qid: str) -> None:
    examples = load_question(qid).examples
    assert len(examples) >= 20, f"{qid}: {len(examples)} graded answers"
    held = [e for e in examples if e.get("split") == "held"]
    assert len(held) >= 10
    for part in (examples, held):
        assert any(re.search(r"[\u4e00-\u9fff]", e["answer"]) for e in part)
        assert any(not re.search(r"[\u4e00-\u9fff]", e["answer"]) for e in part)
        assert {e["expect"] for e in part} >= {"full", "partial", "zero"}


@pytest.mark.parametrize("split", ["tune", "held"])
def test_answer_sets_meet_the_targets(split: str) -> None:
    """Among answers graded at once >= 97% get the fair verdict, no wrong or incomplete answer
    gets full marks, and at most 15% wait for a teacher (held out: the threshold was chosen on
    ``tune`` only)."""
    outcomes = agreement.quiz_outcomes(split)
    s = agreement.summary(outcomes)
    unfair = [(o.source, o.answer, o.expect, o.got_score) for o in outcomes if not o.review and not o.fair]
    assert s["fair_auto"] >= 0.97, (s, unfair)
    assert s["wrong_full_auto"] == 0, (s, unfair)
    assert s["review_share"] <= 0.15, s


@pytest.mark.parametrize("qid", TEXT_QUESTIONS)
def test_every_rubric_message_exists_in_both_languages_and_names_no_internal_id(qid: str) -> None:
    q = load_question(qid)
    ids = [item["id"] for item in q.info["rubric"]["items"]]
    for item in q.info["rubric"]["items"]:
        needed = ["missing"] + (["confused"] if item.get("wrong") or item.get("negation") == "wrong" or item.get("role") else [])
        for key in needed:
            msg = item.get(key) or {}
            assert msg.get("zh") and msg.get("en"), f"{qid} {item['id']}: {key} message"
            for text in msg.values():
                assert not any(i in text for i in ids), f"{qid}: {text}"


@pytest.mark.parametrize("quiz_id", all_quiz_ids())
def test_quizzes_load(quiz_id: str) -> None:
    quiz = load_quiz(quiz_id)
    assert quiz.question_ids and quiz.mode in ("practice", "graded")


def test_a_blind_batch_measures_what_fresh_answers_get() -> None:
    """``blind6``: 120 answers to the six self-test questions (20 each, zh and en) written in session 6
    by someone who never ran the grader, measured once and not looked at. On fresh answers the
    confident path stays safe (no wrong answer at full marks) but the targets are not met: 0.802
    fair among auto-graded, 24% to the teacher. A ratchet at that measurement, not the target."""
    outcomes = agreement.quiz_outcomes("blind6")
    s = agreement.summary(outcomes)
    unfair = [(o.source, o.answer, o.expect, o.got_score) for o in outcomes if not o.review and not o.fair]
    assert s["n"] == 120 and s["wrong_full_auto"] == 0, (s, unfair)
    assert s["fair_auto"] >= 0.80 and s["review_share"] <= 0.25, (s, unfair)


@pytest.mark.parametrize("qid", TEXT_QUESTIONS)
def test_the_same_answer_carries_the_same_label(qid: str) -> None:
    """One answer text (case, spaces and punctuation aside) is one fair share: a labelled twin with
    another share makes the review benchmark's text reuse count a share the teacher did not give."""
    seen: dict[str, tuple[str, float | None, str]] = {}
    for e in load_question(qid).examples:
        key = re.sub(r"[\s\W_]+", "", e["answer"].lower())
        label = (e["expect"], e.get("score"), e.get("split", ""))
        first = seen.setdefault(key, label)
        assert first[:2] == label[:2], f"{qid}: {e['answer']!r} labelled {first} and {label}"
