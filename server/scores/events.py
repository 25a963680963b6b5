"""``score_changed``: the one event every change to a counted score sends.

A counted score (the gradebook's number for one student and item) moves when a grading lands, a
teacher overrides or hand-scores, a regrade or an integrity decision settles, results are released,
a quiz attempt ends or its free text is decided, or a reader earns or loses trust. Each of those
places calls ``changed`` (or ``changed_submissions`` / ``changed_attempts``) once, after the change
is committed or about to be; what follows a change (LTI passback today, any cache tomorrow)
subscribes here instead of being called by hand from every place, so a new place that changes a
score cannot forget the LMS. Subscribers run in the sender's process and must not raise (a
subscriber's failure is logged and never undoes the change).

``tests/server/test_score_events.py`` lists every path that changes a score and checks each sends it.
"""
from __future__ import annotations

import logging
from typing import Iterable

from blinker import Namespace

from server.extensions import db
from server.models import Submission
from server.quiz.models import QuizAttempt

log = logging.getLogger(__name__)
_signals = Namespace()

# sender: the course id; keyword arguments: user_id (None: every student), item ("hw:<id>", "quiz:<id>"; None: every item)
score_changed = _signals.signal("score-changed")


def changed(course_id: int, user_id: int | None = None, item: str | None = None) -> None:
    """Tell every subscriber that the counted score of ``user_id`` (or every student) on ``item``
    (or every item) of the course may have changed."""
    for receiver in score_changed.receivers_for(course_id):
        try:
            receiver(course_id, user_id=user_id, item=item)
        except Exception:  # a subscriber's failure never undoes the change that was made
            log.exception("score_changed subscriber %r failed for course %s", receiver, course_id)


def changed_submissions(submission_ids: Iterable[int]) -> None:
    """``changed`` for the students and homework of these submissions (a grouped decision)."""
    ids = list(submission_ids)
    for course_id, user_id, assignment_id in set(db.session.execute(
            db.select(Submission.course_id, Submission.user_id, Submission.assignment_id)
            .where(Submission.id.in_(ids)))) if ids else ():
        changed(course_id, user_id, f"hw:{assignment_id}")


def changed_attempts(attempt_ids: Iterable[int]) -> None:
    """``changed`` for the students and quizzes of these attempts (a finished attempt, a review decision)."""
    ids = list(attempt_ids)
    for course_id, user_id, quiz_id in set(db.session.execute(
            db.select(QuizAttempt.course_id, QuizAttempt.user_id, QuizAttempt.quiz_id)
            .where(QuizAttempt.id.in_(ids)))) if ids else ():
        if course_id is not None:  # a practice attempt outside a course counts nowhere
            changed(course_id, user_id, f"quiz:{quiz_id}")
