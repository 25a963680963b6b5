"""Units in numeric answers: the all-reduce question asks "约需多少秒" yet refused a bare
"0.56" with "请带上单位", and its list of units left out 秒. A question that fixes its unit takes a
bare number; a wrong unit is answered with the kind of quantity and every spelling that works."""
from __future__ import annotations

import pytest

from coursework.quiz import numeric
from coursework.quiz.bank import all_question_ids, load_question
from coursework.quiz.grading import grade_variant, make_variant
from coursework.quiz.result import AnswerStatus, FormatError

UNIT_WORDS = {"seconds": ({"秒"}, {"second"}), "bytes": ({"字节", "GB"}, {"byte", "GB"})}


def test_the_all_reduce_question_reads_a_bare_number_as_seconds():
    v = make_variant(load_question("ch7_3/comm/allreduce_time"), 7)
    bare = f"{v.answer:.4g}"
    for raw in (bare, f"{bare} 秒", f"{v.answer * 1000:.4g} ms", f"{bare}s"):
        result = grade_variant(v, raw)
        assert result.status != AnswerStatus.FORMAT_ERROR and result.correct, raw


def test_a_wrong_unit_names_the_kind_and_every_spelling():
    with pytest.raises(FormatError) as err:
        numeric.parse_quantity("0.56 GB", "seconds", "s")
    zh, en = err.value.message["zh"], err.value.message["en"]
    assert "时间" in zh and "秒" in zh and "毫秒" in zh and "ms" in zh
    assert "a time" in en and "秒" in en


@pytest.mark.parametrize("qid", [q for q in all_question_ids() if load_question(q).type == "numeric"])
def test_a_question_that_takes_a_bare_number_says_its_unit(qid):
    q = load_question(qid)
    spec = q.info["numeric"]
    if spec.get("require_unit") or spec["dimension"] not in UNIT_WORDS:
        return  # the unit is asked for, or the answer has none (a count, a ratio)
    zh_words, en_words = UNIT_WORDS[spec["dimension"]]
    assert any(w in q.text("prompt", "zh") for w in zh_words), qid
    assert any(w in q.text("prompt", "en").lower() or w in q.text("prompt", "en") for w in en_words), qid
