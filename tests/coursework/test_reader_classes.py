"""The rule readers' classes of misjudgement seen before, on examples written for this test
(not from the answer sets): each failed before its fix.

- a negation in a consequence clause ("so no GPU holds a full copy") is not a denial of the items;
- a right answer plus a false claim is not full marks;
- a bare list of keywords with no claim is not full marks (it waits for a teacher);
- a note describing a neighbouring field is that field's concept, not this one's;
- a note right about the concept but wrong about this value is wrong;
- every "you are wrong about X" quotes the words read as X.
"""
from __future__ import annotations

import pytest

from coursework.config_annotation import annotate, catalogue
from coursework.quiz.bank import load_question
from coursework.quiz.grading import grade

CAT = catalogue.load()


def judge(path: str, value, text: str) -> annotate.Judgement:
    return annotate.judge(text, CAT.rule("deepspeed", path, CAT.field_value("deepspeed", path, value)), CAT)


def full_and_sure(j: annotate.Judgement) -> bool:
    return j.verdict == annotate.Verdict.CORRECT and not j.needs_review


@pytest.mark.parametrize("text", [
    "shards optimizer states, gradients and parameters, so no GPU stores the full optimizer states or gradients",
    "参数、梯度、优化器状态全部切分，所以没有一张卡有完整的梯度和优化器状态",
    "ZeRO-3 partitions optimizer states, gradients and parameters, hence no card keeps a complete copy of the gradients",
])
def test_a_negation_in_a_consequence_clause_is_not_a_denial(text: str) -> None:
    j = judge("zero_optimization.stage", 3, text)
    assert j.verdict == annotate.Verdict.CORRECT and "denied_and_said" not in j.signs and j.confidence == 1.0, j


@pytest.mark.parametrize("path, value, text", [
    ("zero_optimization.stage", 3, "shards optimizer states, gradients and parameters; it is also faster than ZeRO-2"),
    ("zero_optimization.stage", 3, "优化器状态、梯度、参数都切分，而且比 ZeRO-2 更快"),
])
def test_a_right_note_with_a_false_claim_is_not_full_marks(path: str, value, text: str) -> None:
    assert not full_and_sure(judge(path, value, text))


@pytest.mark.parametrize("qid, text", [
    ("ch7_3/selftest_1", "throughput, capacity, data parallelism, model parallelism"),
    ("ch7_3/selftest_1", "数据并行，模型并行，吞吐，容量"),
])
def test_a_bare_keyword_list_is_not_full_marks_in_the_quiz(qid: str, text: str) -> None:
    r = grade(load_question(qid), 1, text)
    assert r.needs_review or r.provisional_fraction < 1, r


@pytest.mark.parametrize("path, value, text", [
    ("zero_optimization.stage", 3, "ZeRO-3, shard, optimizer states, gradients, parameters"),
    ("zero_optimization.stage", 2, "shard, optimizer states, gradients"),
])
def test_a_bare_keyword_list_is_not_full_marks_in_a_note(path: str, value, text: str) -> None:
    assert not full_and_sure(judge(path, value, text))


@pytest.mark.parametrize("path, text", [
    ("zero_optimization.allgather_bucket_size", "bucket size for the reduce-scatter of gradients"),
    ("zero_optimization.allgather_bucket_size", "梯度 reduce-scatter 时每个桶的大小"),
    ("zero_optimization.reduce_bucket_size", "bucket size for the allgather of parameters"),
    ("zero_optimization.reduce_bucket_size", "allgather 的桶大小，参数聚合时每次拉取多少"),
])
def test_a_note_on_the_neighbouring_field_is_wrong(path: str, text: str) -> None:
    j = judge(path, 500000000, text)
    assert j.verdict in (annotate.Verdict.CONTRADICTION, annotate.Verdict.WRONG_CONCEPT) and j.fraction == 0, j


def test_the_right_field_stays_right() -> None:
    assert full_and_sure(judge("zero_optimization.reduce_bucket_size", 500000000,
                               "gradients are reduced in buckets of this size: bigger buckets, fewer calls, more buffer memory"))


@pytest.mark.parametrize("path, value, text", [
    ("zero_optimization.offload_optimizer", {"device": "none"}, "offload the optimizer states to CPU memory to save GPU memory"),
    ("zero_optimization.offload_optimizer", {"device": "none"}, "把优化器状态卸载到 CPU 内存，节省显存"),
    ("zero_optimization.overlap_comm", True, "设成 true 就是关掉通信和计算的重叠"),
])
def test_right_concept_wrong_value_is_wrong(path: str, value, text: str) -> None:
    j = judge(path, value, text)
    assert j.verdict != annotate.Verdict.CORRECT and j.fraction == 0, j


def test_wrong_about_quotes_the_words_read() -> None:
    j = judge("zero_optimization.stage", 1, "ZeRO-1 shards the optimizer states and the gradients")
    assert j.verdict == annotate.Verdict.CONTRADICTION and j.wrong == ["gradients"]
    assert j.wrong_words == {"gradients": ["gradients"]}
    from coursework.config_annotation.parse import parse
    from graders.config_annotation.core import field_checks, load_config

    parsed = parse("zero_optimization:\n  stage: 1  # ZeRO-1 shards the optimizer states and the grads\n", "x.yaml")
    (check,) = [c for c in field_checks(parsed, "deepspeed", load_config(), CAT) if c.id == "field.zero_optimization.stage"]
    assert "(read in your words: “grads”)" in check.message["en"] and "读到的原话：“grads”" in check.message["zh"]


def test_quiz_feedback_on_a_mixed_up_item_quotes_the_words_read() -> None:
    r = grade(load_question("ch7_3/selftest_1"), 1, "Data parallelism solves capacity, model parallelism solves throughput")
    lines = " ".join(f["en"] for f in r.feedback)
    assert "“" in lines and "capacity" in lines.split("“", 1)[1], lines
