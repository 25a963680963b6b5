"""What a free-text quiz verdict is worth the moment it is given: counted, or provisional.

- **Practice** attempts count nothing, so nothing waits: the student gets the reading, the
  reference answer and what was missing or reversed at once (even a reading the rule reader is
  unsure of, said to be the machine's reading).
- **Graded** attempts: every reader suggests a share (the rule reader always; a language model
  where the course runs one, ``coursework.llm_reader``). The verdict counts at once only when
  (a) a teacher already decided this very answer (normalised text) for this question, in any
  term, or (b) every reader that read it agrees and one of them earned trust on this question for
  verdicts of that kind (full, partial or zero: a reader trusted to give full marks is not thereby
  trusted to fail an answer; ``coursework.trust``; a rule reading it is itself unsure of never
  counts alone). Anything else is *provisional*: stored as ``pending`` with the suggestion, shown
  to the student marked provisional with the reading's lines said as suggestions, and counted only when a teacher confirms it, unless the course counts unconfirmed
  verdicts (``Course.count_unconfirmed``), in which case the suggestion counts and every page and
  export that shows it says it is unconfirmed.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from coursework import trust
from coursework.quiz.result import AnswerStatus, QuestionResult, Text
from server.extensions import db
from server.models import Course
from server.quiz import labels

PRACTICE_NOTE: Text = {
    "zh": "练习模式：这是自动阅读的结果，没有老师确认，也不计分。请对照参考答案看一遍。",
    "en": "Practice: this is the automatic reading, not confirmed by a teacher and not counted. Compare it with the reference answer."}
PROVISIONAL_NOTE: Text = {
    "zh": "暂定：下面是自动阅读读到的内容和建议的分数，老师确认后才算数。",
    "en": "Provisional: below is what the automatic reading found and the score it suggests; it counts once a teacher confirms it."}
DECIDED_BEFORE_NOTE: Text = {
    "zh": "老师以前确认过与此相同的答案，按老师当时给的分数计分。",
    "en": "A teacher already decided this same answer; it gets the points the teacher gave then."}


def _reader_feedback(result: QuestionResult) -> list[Text]:
    """The reading's own lines, without the rubric's "a teacher will confirm" lead."""
    from coursework.quiz.grading import REVIEW_NOTE

    return [f for f in result.feedback if f != REVIEW_NOTE]


def tentative(line: Text) -> Text:
    """A reading's line said as what it is until a teacher confirms it: a suggestion ("the reading
    suggests ... mixed up"), never a final "you are wrong"."""
    return {"zh": f"自动阅读认为（待老师确认）：{line.get('zh', '')}",
            "en": f"The reading suggests (a teacher will confirm): {line.get('en', '')}"}


def settle(result: QuestionResult, question: Any, raw: str, mode: str, course_id: int | None,
           extra_readings: dict[str, float | None] | None = None) -> QuestionResult:
    """``result`` (the rule reader's) as it is stored for an attempt in ``mode``."""
    if question.type != "text" or result.status == AnswerStatus.FORMAT_ERROR:
        return result
    details = dict(result.details)
    rule_share = result.provisional_fraction
    if mode != "graded":
        if not result.needs_review:
            return result
        details.pop("needs_review", None)
        details["practice_unsure"] = True
        return replace(result, status=AnswerStatus.GRADED, score=round(rule_share * result.max_score, 4),
                       feedback=[PRACTICE_NOTE] + _reader_feedback(result), details=details)
    readings: dict[str, float | None] = {trust.RULE_READER: round(rule_share, 4), **(extra_readings or {})}
    details["readings"] = readings
    known = labels.known_decision(question.id, raw)
    if known is not None:
        details.update(decided_before=True, provisional_fraction=known)
        details.pop("needs_review", None)
        return replace(result, status=AnswerStatus.GRADED, score=round(known * result.max_score, 4),
                       feedback=[DECIDED_BEFORE_NOTE], details=details)
    low = trust.lowest(readings)
    # trust is per kind of verdict: a reader trusted for its full marks is not thereby trusted to fail
    trusted = labels.trusted_readers(question.id, trust.kind_of(low)) if low is not None else set()
    if result.needs_review:
        trusted.discard(trust.RULE_READER)  # a reading unsure of itself never counts alone
    share, why = trust.combined(readings, trusted)
    if why == "trusted" and share is not None:
        details.pop("needs_review", None)
        details["counted_by"] = sorted(r for r in readings if r in trusted and readings[r] is not None)
        return replace(result, status=AnswerStatus.GRADED, score=round(share * result.max_score, 4), details=details)
    share = rule_share if share is None else share
    if why == "untrusted" and result.needs_review:
        why = "unsure"  # the rule reader doubts its own reading (the student is told so)
    details.update(needs_review=True, provisional_fraction=round(share, 4), provisional_reason=why)
    course = db.session.get(Course, course_id) if course_id is not None else None
    counted = bool(course is not None and course.count_unconfirmed)
    details["unconfirmed_counted"] = counted
    return replace(result, status=AnswerStatus.NEEDS_REVIEW, score=round(share * result.max_score, 4) if counted else 0.0,
                   feedback=[PROVISIONAL_NOTE] + [tentative(f) for f in _reader_feedback(result)], details=details)
