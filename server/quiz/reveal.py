"""When an answered question shows its reference answer, explanation and detailed feedback.

A graded quiz keeps them to itself until the teacher says so (``Quiz.reference_answers``, one
setting per quiz file): "after_close" (the default: once the quiz's ``closes_at`` has passed,
never while it has none), "never", or "at_once". Shown at once, a question whose text never
changes (no generator) would hand attempt 1's answer to attempts 2 and 3, so such a question
shows it only in the student's last allowed attempt.

The same questions are in the unlimited practice bank. A practice attempt shows a question's
reference only where every graded quiz holding the question would show it by now: otherwise an
hour of practice is a copy of the graded quiz's answers. The verdict and the score are always
shown; what is held back is everything that names the right answer: the reference and the
explanation, and for a question whose text never changes its feedback too ("Missed: ...",
"step 2 should be ..."). A generated question's feedback speaks of its own numbers, and so may
name this attempt's answer: its verdict line (the question's ``feedback.incorrect``, a worked
formula or a hint) and any line holding the answer's value or text are held with the reference
(``without_answer``); what is left names the slip ("that is the unsharded figure"). A fixed-text
*choice* question is not even judged in practice while it is held (``verdict_withheld``): trying
one option per attempt, the verdict alone would name the right one.
"""
from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import Any

from coursework.quiz import numeric
from coursework.quiz.bank import BankError, Quiz, all_quiz_ids, load_question, load_quiz
from coursework.quiz.grading import render
from server.models import utcnow


def _closed(quiz: Quiz, now: datetime) -> bool:
    return bool(quiz.closes_at) and now >= datetime.fromisoformat(quiz.closes_at.replace("Z", ""))


def fixed_text(question_id: str) -> bool:
    """The question looks the same in every attempt (no generator: only its option order moves)."""
    return load_question(question_id).generator is None


def graded_shows(quiz: Quiz, question_id: str, attempt_no: int | None, now: datetime) -> bool:
    """Whether the graded ``quiz`` shows this question's reference now; ``attempt_no`` is the
    attempt's number (None: "in any attempt", as the practice bank asks)."""
    policy = quiz.reference_answers
    if policy == "never":
        return False
    if _closed(quiz, now):
        return True
    if policy != "at_once":
        return False
    if not fixed_text(question_id):
        return True
    last = quiz.attempt_limit is not None and attempt_no is not None and attempt_no >= quiz.attempt_limit
    return last


@lru_cache(maxsize=1)
def _graded_quizzes_by_question() -> dict[str, tuple[str, ...]]:
    """question id -> the graded quizzes that hold it (quiz files change only with a restart)."""
    out: dict[str, list[str]] = {}
    for quiz_id in all_quiz_ids():
        try:
            quiz = load_quiz(quiz_id)
        except BankError:
            continue
        if quiz.mode == "graded":
            for qid in quiz.question_ids:
                out.setdefault(qid, []).append(quiz_id)
    return {qid: tuple(ids) for qid, ids in out.items()}


CHOICE_TYPES = ("single", "multiple", "ordering")


def verdict_withheld(att: Any, question_id: str, qtype: str, now: datetime | None = None) -> bool:
    """A practice answer to a fixed-text choice question that a graded quiz still holds back: its
    verdict alone names the right option after a few tries (one per practice attempt), so practice
    records it without judging it until the graded quiz shows its references."""
    return (att.mode != "graded" and qtype in CHOICE_TYPES and fixed_text(question_id)
            and not reference_shown(att, question_id, now))


def reference_shown(att: Any, question_id: str, now: datetime | None = None) -> bool:
    """Whether the answered ``question_id`` of attempt ``att`` (any object with the attempt's
    ``quiz_id``, ``mode`` and ``attempt_no``) may show its reference answer now."""
    now = now or utcnow()
    if att.mode == "graded":
        try:
            return graded_shows(load_quiz(att.quiz_id), question_id, att.attempt_no, now)
        except BankError:
            return False  # a quiz file since removed: keep its answers to itself
    return all(graded_shows(load_quiz(q), question_id, None, now)
               for q in _graded_quizzes_by_question().get(question_id, ()))


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?")


def _names_value(text: str, value: float, dimension: str, rtol: float) -> bool:
    """Whether ``text`` holds a number that is ``value`` (base units) in any unit of ``dimension``."""
    factors = {f for f, _ in numeric.UNITS.get(dimension, {"": (1, "-")}).values()} or {1}
    for m in _NUMBER.finditer(text):
        try:
            x = float(m.group(0).replace(",", ""))
        except ValueError:
            continue
        if any(abs(x * f - value) <= max(rtol, 0.01) * abs(value) + 1e-12 for f in factors):
            return True
    return False


def without_answer(variant: Any, feedback: list[dict[str, str]]) -> list[dict[str, str]]:
    """``feedback`` (an answer's stored lines) less every line that names ``variant``'s answer:
    the question's verdict lines rendered with this variant's numbers (worked formulas, hints),
    and any line holding the answer's number (in any unit of its dimension) or its text. For an
    answer whose reference is held."""
    q = variant.question
    verdicts = [{k: render(t, variant.params) for k, t in v.items()}
                for v in (q.info.get("feedback") or {}).values() if isinstance(v, dict)]
    spec = q.info.get("numeric") or {}
    texts = [variant.reference_text(lang) for lang in ("zh", "en")] if q.type != "numeric" else []

    def names(line: dict[str, str]) -> bool:
        if line in verdicts:
            return True
        for t in line.values():
            if not isinstance(t, str):
                continue
            if spec and variant.answer is not None and \
                    _names_value(t, float(variant.answer), spec.get("dimension", "number"), float(spec.get("rtol", 0.02))):
                return True
            if any(ref and ref in t for ref in texts):
                return True
        return False

    return [line for line in feedback if isinstance(line, dict) and not names(line)]
