"""Provisional free-text answers as the gradebook, the exports and the course setting see them.

A provisional answer (``review_state = 'pending'``) keeps the reader's suggestion in
``auto_score``; its ``score`` is 0 unless the course counts unconfirmed verdicts, in which case it
is the suggestion. ``set_count_unconfirmed`` switches a course between the two and rewrites the
waiting answers' scores and their attempts' totals in two statements, so the gradebook follows
at once; a teacher's decision replaces the score either way.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select, update

from server.extensions import db
from server.models import Course
from server.quiz.models import AttemptStatus, QuizAnswer, QuizAttempt, ReviewState

PENDING = ReviewState.PENDING.value


def _pending_by_attempt(course_id: int, user_id: int | None = None) -> list[Any]:
    """(attempt id, user, quiz, attempt no, attempt score, waiting answers, their counted points,
    the points the readers suggest for them) of the course's finished attempts that hold provisional answers: one grouped query over the
    (indexed) pending answers only."""
    q = (select(QuizAttempt.id, QuizAttempt.user_id, QuizAttempt.quiz_id, QuizAttempt.attempt_no, QuizAttempt.score,
                func.count(QuizAnswer.id), func.coalesce(func.sum(QuizAnswer.score), 0.0),
                func.coalesce(func.sum(QuizAnswer.auto_score), 0.0))
         .join(QuizAttempt, QuizAttempt.id == QuizAnswer.attempt_id)
         .where(QuizAnswer.review_state == PENDING, QuizAttempt.course_id == course_id,
                QuizAttempt.status != AttemptStatus.OPEN.value)
         .group_by(QuizAttempt.id, QuizAttempt.user_id, QuizAttempt.quiz_id, QuizAttempt.attempt_no, QuizAttempt.score))
    if user_id is not None:
        q = q.where(QuizAttempt.user_id == user_id)
    return list(db.session.execute(q))


def mark_cells(course_id: int, policies: dict[str, str], cells: dict[int, dict[str, Any]],
               user_id: int | None = None) -> None:
    """Set ``waiting`` / ``unconfirmed`` / ``suggested`` on the quiz cells whose counted attempt holds provisional
    answers (the counted attempt: the one whose score the cell shows)."""
    for _aid, uid, qid, no, score, n, points, suggested in _pending_by_attempt(course_id, user_id):
        cell = cells.get(uid, {}).get(f"quiz:{qid}")
        if cell is None:
            continue
        if cell.computed is None or abs(score - cell.computed) > 1e-6 or cell.waiting:
            # not the attempt the cell counts (or an equal-scoring one already marked it): said
            # apart, since a confirmation there may make it the one that counts
            cell.waiting_elsewhere += int(n)
            continue
        cell.waiting = int(n)
        cell.unconfirmed = round(float(points), 4)
        cell.suggested = round(float(suggested), 4)


def waiting_of(course_id: int, user_id: int) -> list[Any]:
    """One student's provisional answers in the course, newest first (the student's pages)."""
    return list(db.session.execute(
        select(QuizAnswer.id, QuizAnswer.quiz_id, QuizAnswer.question_id, QuizAnswer.score, QuizAnswer.auto_score,
               QuizAnswer.max_score)
        .join(QuizAttempt, QuizAttempt.id == QuizAnswer.attempt_id)
        .where(QuizAnswer.review_state == PENDING, QuizAttempt.course_id == course_id, QuizAttempt.user_id == user_id)
        .order_by(QuizAnswer.id.desc())))


def set_count_unconfirmed(course: Course, count: bool) -> int:
    """Switch the course's choice and rewrite every waiting answer's score (the suggestion, or 0)
    and its attempt's total; returns how many answers changed. The caller commits."""
    course.count_unconfirmed = bool(count)
    attempts = select(QuizAttempt.id).where(QuizAttempt.course_id == course.id, QuizAttempt.mode == "graded")
    changed = db.session.execute(
        update(QuizAnswer).where(QuizAnswer.review_state == PENDING, QuizAnswer.attempt_id.in_(attempts))
        .values(score=case((QuizAnswer.auto_score.is_not(None), QuizAnswer.auto_score), else_=0.0) if count else 0.0)
        .execution_options(synchronize_session=False)).rowcount
    total = (select(func.coalesce(func.sum(QuizAnswer.score), 0.0)).where(QuizAnswer.attempt_id == QuizAttempt.id)
             .scalar_subquery())
    touched = select(QuizAnswer.attempt_id).where(QuizAnswer.review_state == PENDING)
    db.session.execute(update(QuizAttempt).where(QuizAttempt.id.in_(attempts), QuizAttempt.id.in_(touched))
                       .values(score=total).execution_options(synchronize_session=False))
    return changed or 0
