"""The rule readers with trust assumed: classes a blind attack found misjudged, each on examples
written for this test (not the attack's sentences, not the blind set's). A right note or answer
is never failed at full confidence (read right, or routed to a teacher as unsure), and a wrong one
is never given full marks at full confidence.

- framed negation: "it is not true that ...", "说……是错的" deny the claim they frame;
- a sentence that opens by contrasting another value ("unlike stage 3, which ...") is about this one
  after the contrast;
- Chinese paraphrases of sharding ("每张卡只保存一部分……") the vocabulary lacks;
- analogies ("like a jar of coins ...");
- "not replicated" is sharded;
- an offload switched off in other words ("卸载是关的");
- quiz synonyms the rubric lacks ("Adam's moments"), and keyword stuffing after a wrong mapping.
"""
from __future__ import annotations

import pytest

from coursework.config_annotation import annotate, catalogue
from coursework.quiz.bank import load_question
from coursework.quiz.grading import grade

CAT = catalogue.load()
STAGE = "zero_optimization.stage"


def judge(path: str, value, text: str, dialect: str = "deepspeed") -> annotate.Judgement:
    return annotate.judge(text, CAT.rule(dialect, path, CAT.field_value(dialect, path, value)), CAT)


def failed_for_sure(j: annotate.Judgement) -> bool:
    return j.fraction < 1 and not j.needs_review


def full_for_sure(j: annotate.Judgement) -> bool:
    return j.verdict == annotate.Verdict.CORRECT and not j.needs_review


@pytest.mark.parametrize("value, text", [
    (3, "it isn't true that each GPU here keeps the whole parameter set: parameters, gradients and optimizer states are all sharded"),
    (3, "it is wrong to think that every rank stores full weights; the parameters, gradients and optimizer states are partitioned"),
    (3, "要是说每张卡都留着完整参数，那是错的：参数、梯度、优化器状态全部切分"),
    (3, "并不是每张卡都有完整的参数，参数、梯度和优化器状态都切开了"),
])
def test_a_framed_negation_of_a_wrong_claim_is_not_failed_for_sure(value, text: str) -> None:
    assert not failed_for_sure(judge(STAGE, value, text))


@pytest.mark.parametrize("value, text", [
    (2, "it would be a mistake to claim the gradients and optimizer states get sharded; every GPU replicates them"),
    (2, "it's not true that optimizer states and gradients are partitioned in this stage"),
    (2, "说这一级切分了优化器状态和梯度是错的"),
    (2, "并不是切分优化器状态和梯度"),
])
def test_a_framed_negation_of_the_right_claim_is_not_full_marks_for_sure(value, text: str) -> None:
    assert not full_for_sure(judge(STAGE, value, text))


@pytest.mark.parametrize("value, text", [
    (2, "unlike ZeRO-3, which shards the parameters as well, this stage shards the optimizer states and gradients"),
    (2, "unlike stage 3 that also splits parameters, here the optimizer states and gradients are split and parameters stay whole"),
    (1, "unlike stage 2 (which also shards gradients), this one shards the optimizer states only"),
    (1, "不像 ZeRO-2 还会切梯度，这里只切分优化器状态"),
])
def test_a_sentence_opening_with_a_contrast_is_read_after_the_contrast(value, text: str) -> None:
    j = judge(STAGE, value, text)
    assert j.verdict == annotate.Verdict.CORRECT or j.needs_review, j


@pytest.mark.parametrize("value, text", [
    (2, "每张卡只保存一部分优化器状态和一部分梯度，参数每卡都有完整一份"),
    (2, "优化器状态和梯度每卡只拿自己那份，参数各卡都是全的"),
    (3, "每张卡只存自己那一份参数、梯度和优化器状态"),
    (1, "每张卡只留自己那一块优化器状态"),
])
def test_a_chinese_paraphrase_of_sharding_is_not_failed_for_sure(value, text: str) -> None:
    assert not failed_for_sure(judge(STAGE, value, text))


@pytest.mark.parametrize("path, value, text", [
    ("gradient_accumulation_steps", 4, "like filling a bucket before carrying it: 4 micro-batches of gradients pile up, then one update"),
    ("gradient_accumulation_steps", 4, "好比攒够一桶水再挑走：4 个小批次先攒着，攒满了才更新一次"),
    (STAGE, 2, "think of a shared notebook where each student keeps a few pages of the optimizer states and gradients"),
])
def test_an_analogy_is_not_failed_for_sure(path: str, value, text: str) -> None:
    assert not failed_for_sure(judge(path, value, text))


@pytest.mark.parametrize("value, text", [
    (3, "parameters, gradients and optimizer states are not replicated"),
    (3, "nothing is replicated: the parameters, gradients and optimizer states live in pieces, one piece per GPU"),
    (3, "参数、梯度、优化器状态都不复制到每张卡"),
])
def test_not_replicated_is_read_as_sharded(value, text: str) -> None:
    j = judge(STAGE, value, text)
    assert not failed_for_sure(j), j


@pytest.mark.parametrize("value, text", [
    (2, "optimizer states and gradients are not replicated; parameters are replicated"),
])
def test_not_replicated_stays_a_claim(value, text: str) -> None:
    assert judge(STAGE, value, text).verdict == annotate.Verdict.CORRECT


@pytest.mark.parametrize("path, value, text, dialect", [
    ("fsdp_config.fsdp_offload_params", False, "参数卸载是关的，参数和梯度都留在显存里", "llamafactory"),
    ("fsdp_config.fsdp_offload_params", False, "卸载关着，所以更快，但占显存", "llamafactory"),
    ("zero_optimization.offload_optimizer", {"device": "none"}, "优化器状态的卸载是关着的，优化器状态留在显存", "deepspeed"),
])
def test_an_offload_switched_off_in_other_words_is_not_failed_for_sure(path: str, value, text: str, dialect: str) -> None:
    assert not failed_for_sure(judge(path, value, text, dialect))


def quiz(qid: str, text: str):
    return grade(load_question(qid), 1, text)


@pytest.mark.parametrize("text", [
    "Stage 1 splits just Adam's moment estimates, stage 2 also splits the grads, stage 3 also splits the weights; "
    "FSDP full_shard is stage 3.",
    "ZeRO-1 partitions Adam's first and second moments; ZeRO-2 adds gradients; ZeRO-3 adds parameters. FSDP full_shard = ZeRO-3.",
])
def test_a_quiz_synonym_is_not_failed_for_sure(text: str) -> None:
    r = quiz("ch7_3/selftest_3", text)
    assert r.needs_review or r.provisional_fraction >= 1, r


@pytest.mark.parametrize("qid, text", [
    ("ch7_3/selftest_3", "ZeRO-1 shards gradients, ZeRO-2 parameters, ZeRO-3 optimizer states. "
                         "optimizer states parameters gradients stage 3 FSDP full_shard ZeRO-3"),
    ("ch7_3/selftest_3", "ZeRO-1 切参数，ZeRO-2 切优化器状态，ZeRO-3 切梯度。优化器状态 梯度 参数 FSDP full_shard 对应 ZeRO-3"),
])
def test_keyword_stuffing_after_a_wrong_mapping_is_not_credited_for_sure(qid: str, text: str) -> None:
    r = quiz(qid, text)
    assert r.needs_review or r.provisional_fraction <= 0.25, r
