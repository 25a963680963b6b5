"""Trust per kind of verdict: a reader's full marks, partial shares and zeros each earn
trust on their own labels, so a reader that is right about good answers but fails right answers
in unfamiliar words is trusted for its full marks and never for its zeros."""
from __future__ import annotations

from coursework import trust


def test_kind_of_a_share() -> None:
    assert [trust.kind_of(x) for x in (1.0, 0.995, 0.5, 0.02, 0.0)] == ["full", "full", "partial", "partial", "zero"]


def test_each_kind_is_judged_on_its_own_labels() -> None:
    labels = [(1.0, 1.0)] * 40 + [(0.0, 0.0)] * 40 + [(0.0, 1.0)] * 5 + [(0.5, 0.5)] * 10
    kinds = trust.tally_kinds("rule", "q", labels)
    assert kinds["full"].earned() and kinds["full"].decided == 40
    assert not kinds["zero"].earned() and kinds["zero"].zero_to_full == 5 and kinds["zero"].needed() == 0
    assert not kinds["partial"].earned() and kinds["partial"].needed() == 20


def test_one_right_answer_failed_withdraws_trust_in_zeros_for_good() -> None:
    kinds = trust.tally_kinds("rule", "q", [(0.0, 0.0)] * 300 + [(0.0, 1.0)])
    assert kinds["zero"].share > 0.99 and not kinds["zero"].earned()
    assert trust.tally_kinds("rule", "q", [(0.0, 0.0)] * 30)["zero"].earned()


def test_the_cautious_reading_decides_the_kind() -> None:
    assert trust.lowest({"rule": 1.0, "llm": 0.0}) == 0.0 and trust.lowest({"rule": None}) is None
