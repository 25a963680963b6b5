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
"step 2 should be ..."); a generated question's feedback speaks of its own numbers. A fixed-text
*choice* question is not even judged in practice while it is held (``verdict_withheld``): trying
one option per attempt, the verdict alone would name the right one.
"""
from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from coursework.quiz.bank import BankError, Quiz, all_quiz_ids, load_question, load_quiz
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
