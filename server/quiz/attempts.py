"""Quiz rules: starting an attempt (mode, limit, time window), answering one question, finishing,
and the score that reaches the gradebook (best or last finished attempt)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from flask import current_app
from sqlalchemy import func
from sqlalchemy.exc import IntegrityError

from coursework.quiz.bank import Quiz, load_question
from coursework.quiz.grading import REVIEW_NOTE, grade_variant, make_variant
from coursework.quiz.result import AnswerStatus, QuestionResult
from coursework.quiz.seeds import variant_seed
from server.extensions import db
from server.models import utcnow
from server.quiz import provisional, reveal, store
from server.quiz.models import AttemptStatus, QuizAnswer, QuizAttempt, ReviewState
from server.scores import events


class QuizRuleError(Exception):
    """Starting or answering is not allowed now; ``code`` picks the message shown."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def attempts_of(user_id: int, quiz_id: str) -> list[QuizAttempt]:
    """The user's attempts at a quiz, oldest first."""
    return list(db.session.scalars(db.select(QuizAttempt).where(
        QuizAttempt.user_id == user_id, QuizAttempt.quiz_id == quiz_id).order_by(QuizAttempt.attempt_no)))


def start_refusal(quiz: Quiz, user_id: int, now: datetime | None = None) -> str | None:
    """Why a new attempt may not start (``not_open``, ``closed``, ``no_attempts_left``), or None."""
    now = now or utcnow()
    opens, closes = quiz.opens, quiz.closes
    if opens and now < opens:
        return "not_open"
    if closes and now >= closes:
        return "closed"
    if quiz.mode == "graded" and quiz.attempt_limit is not None:
        used = sum(1 for a in attempts_of(user_id, quiz.id))
        if used >= quiz.attempt_limit:
            return "no_attempts_left"
    return None


def start_attempt(quiz: Quiz, user_id: int, course_id: int | None) -> QuizAttempt:
    """A new attempt (an open one is resumed instead of starting another)."""
    existing = attempts_of(user_id, quiz.id)
    if existing and existing[-1].is_open and not _expired(existing[-1]):
        return existing[-1]
    refusal = start_refusal(quiz, user_id)
    if refusal:
        raise QuizRuleError(refusal)
    max_score = sum(load_question(q).points for q in quiz.question_ids)
    attempt = QuizAttempt(user_id=user_id, course_id=course_id, quiz_id=quiz.id,
                          attempt_no=(existing[-1].attempt_no + 1) if existing else 1, mode=quiz.mode,
                          question_ids=list(quiz.question_ids), closes_at=quiz.closes,
                          max_score=max_score)
    db.session.add(attempt)
    try:
        db.session.commit()
    except IntegrityError:
        # A double-clicked "Start": the other request inserted this attempt number first
        # (UNIQUE(user, quiz, attempt_no)). Open the attempt that won instead of failing.
        db.session.rollback()
        won = db.session.scalar(db.select(QuizAttempt).where(
            QuizAttempt.user_id == user_id, QuizAttempt.quiz_id == quiz.id,
            QuizAttempt.attempt_no == attempt.attempt_no))
        if won is None:
            raise
        return won
    return attempt


def _expired(attempt: Any) -> bool:
    return attempt.closes_at is not None and utcnow() >= attempt.closes_at


def seed_for(attempt: Any, question_id: str) -> int:
    """The variant this student sees for this question in this attempt of this quiz (reproducible;
    a practice attempt never has a graded attempt's variant)."""
    return variant_seed(attempt.user_id, question_id, attempt.attempt_no, key=current_app.config["QUIZ_SEED_KEY"],
                        quiz=attempt.quiz_id)


def variant_for(attempt: Any, question_id: str):
    """The concrete question (numbers, option order) shown in this attempt."""
    return cached_variant(question_id, seed_for(attempt, question_id))


@lru_cache(maxsize=8192)
def cached_variant(question_id: str, seed: int):
    """Variants are pure functions of (question, seed): build each once per process.

    Callers must treat the variant as read-only.
    """
    return make_variant(load_question(question_id), seed)


@dataclass
class AnswerOutcome:
    result: QuestionResult
    answer: dict[str, Any] | None  # the stored row's values with its id; None for a format error (nothing stored)
    attempt_score: float  # the attempt's running score after this answer


def answer_question(attempt: Any, question_id: str, raw: str, lang: str, variant: Any = None) -> AnswerOutcome:
    """Grade and store one answer; a format error is returned but not stored.

    ``attempt`` is the attempt's row as ``store.attempt_row`` reads it (any object with the
    attempt's columns); storing goes through ``store.store_answer``, which re-checks that the
    attempt is still open and that the question has no answer yet, atomically. ``variant`` is
    ``variant_for(attempt, question_id)`` when the caller has it already (the answer post does):
    its seed is not derived again and its generator not run again.
    """
    if attempt.status != AttemptStatus.OPEN.value:
        raise QuizRuleError("attempt_closed")
    if _expired(attempt):
        finish_attempt(db.session.get(QuizAttempt, attempt.id), AttemptStatus.EXPIRED)
        raise QuizRuleError("closed")
    if question_id not in attempt.question_ids:
        raise QuizRuleError("unknown_question")
    if variant is None or variant.question.id != question_id:
        variant = variant_for(attempt, question_id)
    seed = variant.seed
    result = grade_variant(variant, raw)
    if result.status != AnswerStatus.FORMAT_ERROR and reveal.verdict_withheld(attempt, question_id, variant.question.type):
        result = replace(result, score=0.0, feedback=[], details={**result.details, "unjudged": "graded_quiz_holds_it"})
    if result.status != AnswerStatus.FORMAT_ERROR and variant.question.type == "text":
        # practice: instant, never waiting; graded: counted only where trust was earned (or a
        # teacher decided this answer before), else provisional (``server.quiz.provisional``)
        result = provisional.settle(result, variant.question, raw, attempt.mode, attempt.course_id,
                                    _other_readings(variant, raw, attempt.mode))
    if result.needs_review and attempt.mode != "graded":  # practice never waits, whatever the question type
        result = _reading_stands(result)
    if result.status == AnswerStatus.FORMAT_ERROR:
        _count_format_error(attempt, question_id)
        return AnswerOutcome(result, None, attempt.score)
    key = (attempt.id, question_id)
    answer = {"attempt_id": attempt.id, "user_id": attempt.user_id, "quiz_id": attempt.quiz_id,
              "question_id": question_id, "position": attempt.question_ids.index(question_id), "seed": seed,
              "lang": lang, "raw_answer": raw[:4000], "score": result.score, "max_score": result.max_score,
              "fraction": result.fraction, "correct": result.correct, "format_errors": _pending_format_errors.get(key, 0),
              "details_json": result.details, "feedback_json": result.feedback,
              "review_state": ReviewState.PENDING.value if result.needs_review else None,
              "auto_score": round(result.provisional_fraction * result.max_score, 4)}
    try:
        answer["id"] = store.store_answer(answer)
    except store.AnswerRefused as err:
        raise QuizRuleError(err.code) from None
    _pending_format_errors.pop(key, None)
    return AnswerOutcome(result, answer, round(attempt.score + result.score, 4))


def _reading_stands(result: QuestionResult) -> QuestionResult:
    """An unsure practice answer graded by the rubric's own reading, without a teacher: practice
    counts nothing, and unlimited practice attempts must not fill the teachers' queue."""
    fraction = result.provisional_fraction
    return replace(result, status=AnswerStatus.GRADED, score=round(fraction * result.max_score, 4),
                   feedback=[f for f in result.feedback if f is not REVIEW_NOTE and f != REVIEW_NOTE])


def _other_readings(variant: Any, raw: str, mode: str) -> dict[str, float | None]:
    """Readers besides the rule reader, for graded attempts only (practice stays instant): the
    course's language-model reader when one is configured (``coursework.llm_reader``), else none."""
    if mode != "graded":
        return {}
    from coursework import llm_reader

    reader = llm_reader.from_environment()
    if reader is None:
        return {}
    return {llm_reader.READER: reader.share(variant.question, raw)}


# Format errors are counted per process until the real answer arrives (statistics only; losing
# the count on a restart costs nothing, and no row is written for unreadable input).
_pending_format_errors: dict[tuple[int, str], int] = {}


def _count_format_error(attempt: QuizAttempt, question_id: str) -> None:
    key = (attempt.id, question_id)
    if len(_pending_format_errors) > 100_000:
        _pending_format_errors.clear()
    _pending_format_errors[key] = _pending_format_errors.get(key, 0) + 1


def finish_attempt(attempt: QuizAttempt, status: AttemptStatus = AttemptStatus.SUBMITTED) -> QuizAttempt:
    """Close the attempt; unanswered questions score zero.

    Closing comes first, guarded by ``status = 'open'`` like storing an answer: an answer being
    stored in another tab either committed before (and is in the sum taken next) or is refused
    after. The running score is then replaced by the exact sum of the answers.
    """
    closed = db.session.execute(db.update(QuizAttempt).where(
        QuizAttempt.id == attempt.id, QuizAttempt.status == AttemptStatus.OPEN.value).values(
        status=status.value, finished_at=utcnow())).rowcount
    if closed:
        total = db.session.scalar(db.select(func.coalesce(func.sum(QuizAnswer.score), 0.0))
                                  .where(QuizAnswer.attempt_id == attempt.id))
        db.session.execute(db.update(QuizAttempt).where(QuizAttempt.id == attempt.id).values(score=round(total, 4)))
    db.session.commit()  # expires ``attempt``: it reloads with the stored values
    if closed:  # finished by the student or expired by the time window: the counted score moved
        events.changed_attempts([attempt.id])
    return attempt


def suggested_points(answer: Any) -> float:
    """What the readers suggest for a free-text answer waiting for a teacher (its ``auto_score``)."""
    return float(answer.auto_score if answer.auto_score is not None else answer.score or 0.0)


def sections_to_reread(attempt: QuizAttempt) -> list[str]:
    """Chapter sections of the questions not answered fully, in chapter order. An answer waiting
    for a teacher is judged by its suggestion: one suggested at full points sends no one back."""
    weak = set()
    for qid in attempt.question_ids:
        ans = attempt.answer_for(qid)
        if ans is not None and ans.review_state == ReviewState.PENDING.value:
            full = suggested_points(ans) >= ans.max_score - 1e-9
        else:
            full = ans is not None and ans.correct
        if not full:
            weak.add(load_question(qid).section)
    return sorted(weak, key=lambda s: (len(s), s))


def waiting_summary(attempt: QuizAttempt) -> dict[str, float]:
    """The attempt's free-text answers waiting for a teacher: how many (``n``), what the readers
    suggest for them (``suggested``) and how much of the score they already make up
    (``unconfirmed``: non-zero only where the course counts unconfirmed verdicts)."""
    pending = [a for a in attempt.answers if a.review_state == ReviewState.PENDING.value]
    return {"n": len(pending), "suggested": round(sum(map(suggested_points, pending)), 4),
            "unconfirmed": round(sum(a.score or 0.0 for a in pending), 4)}
