"""The shared reading of short answers (coursework/quiz/textmatch.py) and the rubric's failure
classes seen in earlier terms, as pure functions."""
from __future__ import annotations

import pytest

from coursework.quiz import textmatch as tm
from coursework.quiz.bank import load_question
from coursework.quiz.grading import grade
from coursework.quiz.result import AnswerStatus


def test_normalise_spells_out_enumerated_stages_and_full_width() -> None:
    assert tm.normalise("ZeRO 1/2/3 分别切；") == "zero 1 / zero 2 / zero 3 分别切;"
    assert tm.normalise("Z1-Z3") == "z 1 / z 2 / z 3"


@pytest.mark.parametrize("typo, word", [("paralell", "parallel"), ("paramters", "parameters"),
                                        ("parallelisim", "parallelism"), ("gradeints", "gradients")])
def test_one_edit_typos_of_long_latin_words_are_read(typo: str, word: str) -> None:
    vocab = tm.vocabulary(["parallel", "parameters", "parallelism", "gradients", "sampler"])
    assert tm.spell_fix(typo, vocab)[0] == word


def test_a_different_last_letter_or_a_short_word_is_not_a_typo() -> None:
    vocab = tm.vocabulary(["sampler", "zero"])
    assert tm.spell_fix("samples", vocab)[0] == "samples"
    assert tm.spell_fix("hero", vocab)[0] == "hero"


@pytest.mark.parametrize("clause, term, negated", [
    ("it is not the sampler", "sampler", True), ("参数不切", "参数", True),
    ("parameters are not sharded", "parameters", True), ("模型并行解决显存不够的问题", "显存", False),
    ("lora doesn't need distributed training", "lora", False), ("数据并行解决的不是容量问题", "容量", True),
])
def test_negation_before_and_right_after_a_term(clause: str, term: str, negated: bool) -> None:
    hits = tm.hits(tm.term(term), clause)
    assert hits and hits[0].negated is negated


def test_a_term_never_matches_inside_a_dotted_name() -> None:
    assert tm.hits(tm.term("sampler"), "forgot sampler.set_epoch") == []


@pytest.mark.parametrize("clause, give, get", [
    ("offload trades gpu memory for speed", "gpu memory", "speed"), ("用显存换速度", "显存", "速度"),
    ("faster training in exchange for gpu memory", "gpu memory", "faster training"),
])
def test_trade_direction(clause: str, give: str, get: str) -> None:
    spans = {role: clause[a:b].strip() for a, b, role in tm.trade_spans(clause)}
    assert spans == {"give": give, "get": get}


@pytest.mark.parametrize("qid, answer, score", [
    ("ch7_3/selftest_4", "offload trades GPU memory for speed", 0),  # reversed roles
    ("ch7_3/selftest_6", "it is not the sampler, each card already gets disjoint data; PCIe is too slow", 0),
    ("ch7_3/selftest_5", "LoRA does not fit either, so students only use one card", 0),  # claim bound to the fact
    ("ch7_3/selftest_1", "Throughput: data parallelism. Capacity: model parallelism.", 1),  # colon-first
    ("ch7_3/selftest_3", "ZeRO 三级：优化器状态→梯度→参数，FSDP=第三级", 1),  # "ZeRO 三级" is not stage 3
    ("ch7_3/selftest_3", "ZeRO 1/2/3 分别切 优化器状态、梯度、参数；FSDP full_shard 对应 ZeRO-3", 1),
    ("ch7_3/selftest_3", "Z1: optimizer states; Z2: + gradients; Z3: + parameters. FSDP full_shard = Z3", 1),
    ("ch7_3/selftest_1", "DP 解决吞吐，MP 解决容量", 1),
    ("ch7_3/selftest_1", "data paralell -> throughput, model paralell -> capacity", 1),
    ("ch7_3/selftest_6", "没有 DistributedSampler，每张卡都在跑完整的数据集", 1),
    ("ch7_3/selftest_5", "QLoRA 把 7B 模型压到一块 24G 的卡上就能微调", 1),
    ("ch7_3/selftest_2", "相当于单卡训练一个 N 倍大的 batch；条件是数据切分正确、梯度同步", 1),
])
def test_issue_12_failure_classes(qid: str, answer: str, score: float) -> None:
    r = grade(load_question(qid), 1, answer)
    got = r.provisional_fraction
    assert got == score, (r.details, r.feedback)
    if score == 1:
        assert r.status == AnswerStatus.GRADED and not r.feedback[1:]  # nothing accusing a right answer


def test_keyword_salad_and_unreadable_long_answers_wait_for_a_teacher() -> None:
    for qid, answer in (("ch7_3/selftest_1", "data parallel model parallel throughput capacity"),
                        ("ch7_3/selftest_1", "Both are about using more GPUs and they make things faster for big models")):
        r = grade(load_question(qid), 1, answer)
        assert r.status == AnswerStatus.NEEDS_REVIEW and r.score == 0, r.details


def test_feedback_never_shows_an_internal_id() -> None:
    q = load_question("ch7_3/selftest_3")
    r = grade(q, 1, "ZeRO-1 切参数，ZeRO-2 切梯度，ZeRO-3 切优化器状态；FSDP 对应 ZeRO-1")
    ids = [i["id"] for i in q.info["rubric"]["items"]]
    assert r.feedback and not any(i in m for i in ids for f in r.feedback for m in f.values())
