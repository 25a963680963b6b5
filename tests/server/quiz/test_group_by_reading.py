"""Review groups settle as many answers per decision as the reading truthfully allows:
answers share a group when the reading is the same (items met, missing, contradicted), whatever
words they use; a different reading, or no reading at all, never joins them."""
from __future__ import annotations

from coursework.config_annotation import annotate, catalogue
from coursework.quiz.bank import load_question
from coursework.quiz.grading import grade
from server.dashboard.review_annotation import Pending, group_key as note_key
from server.quiz.review import group_key as quiz_key

Q = "ch7_3/selftest_1"


def _quiz(text: str) -> str:
    r = grade(load_question(Q), 1, text)
    return quiz_key(Q, text, r.details)


def test_quiz_answers_read_alike_share_one_decision() -> None:
    a = "数据并行解决吞吐，模型并行解决容量"
    b = "Data parallelism is how you get more throughput; model parallelism is how a model too big for one card fits"
    assert grade(load_question(Q), 1, a).details["met"] == grade(load_question(Q), 1, b).details["met"]
    assert _quiz(a) == _quiz(b)
    reversed_answer = "Data parallelism solves capacity, model parallelism solves throughput"
    assert _quiz(reversed_answer) != _quiz(a)
    assert _quiz("I have no idea") != _quiz("no clue at all")  # nothing read: grouped by text only


def _note(path: str, value, text: str) -> str:
    cat = catalogue.load()
    j = annotate.judge(text, cat.rule("deepspeed", path, cat.field_value("deepspeed", path, value)), cat)
    p = Pending(1, 1, "s", f"field.{path}", "deepspeed", path, value, text, {}, j.verdict.value, j.fraction, 1.0,
                j.confidence, {"missing": j.missing, "wrong": j.wrong})
    return note_key(p)


def test_notes_read_alike_share_one_decision() -> None:
    path = "zero_optimization.stage"
    a = _note(path, 2, "ZeRO-2 shards the optimizer states and the gradients; parameters stay whole")
    b = _note(path, 2, "优化器状态和梯度切分到各卡，参数每卡保留完整一份")
    assert a == b
    assert _note(path, 3, "ZeRO-2 shards the optimizer states and the gradients; parameters stay whole") != a
    wrong = _note(path, 2, "shards the parameters, gradients and optimizer states")
    assert wrong != a
