"""The two hot quiz paths in SQL: reading an attempt page's state and storing one answer.

Fifty students answering at once make the attempt page and the answer post the busiest
endpoints of the service. Both are plain Core statements built once, with bound parameters:
the ORM's identity map, lazy loads and per-call statement compilation were most of their cost
(start, finish, history and the gradebook stay on the ORM in ``attempts``).

Storing an answer is race-safe without reading every answer back: the score is an increment
on the attempt row guarded by ``status = 'open'`` (so an answer cannot land after the attempt
was finished in another tab), and the unique (attempt, question) index refuses a second answer.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import String, and_, bindparam, case, cast, exists, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from server.extensions import db
from server.models import Membership, Role, User, utcnow
from server.quiz.models import AttemptStatus, QuizAnswer, QuizAttempt
from server.scores.release import holding_mode

_att, _ans, _user, _member = (QuizAttempt.__table__, QuizAnswer.__table__, User.__table__,
                              Membership.__table__)

# Its owner's, and only while the session is current: the owner's session version is checked
# in the same statement, so the hot paths pay no separate query for it (``checks_session_version``).
_owner = _user.alias("owner")  # not the page query's joined user table: that one would be correlated away
_CURRENT = exists().where(_owner.c.id == _att.c.user_id, _owner.c.session_version == bindparam("sv"))
_OWNED = (_att.c.id == bindparam("aid"), _att.c.user_id == bindparam("uid"), _CURRENT)
# The quiz's release rule while it holds results back (``server.scores.release``; NULL: shown), read in the
# same statement so the hot paths pay no query of their own for it.
_HOLDING = holding_mode(_att.c.course_id, "quiz:" + _att.c.quiz_id)
_ATTEMPT_COLUMNS = (_att.c.id, _att.c.user_id, _att.c.quiz_id, _att.c.attempt_no, _att.c.mode, _att.c.status,
                    _att.c.question_ids, _att.c.closes_at, _att.c.score, _att.c.max_score, _att.c.course_id,
                    _HOLDING.label("release_mode"))
# The attempt (only its owner's), for answering it.
_ATTEMPT = select(*_ATTEMPT_COLUMNS).where(*_OWNED)
# The same with what the page shows besides: the owner's name and role (page header) and the
# stored answers as one "position:id,..." string. One row, not one per answer: SQLite hands the
# interpreter lock to another thread at every row it steps, which under load cost more than the
# rest of the page.
# An answer already fully right reads "full" where it has no review state: nothing to ask a teacher about.
_FULL = case((_ans.c.correct.is_(True), "full"), else_="")
# A provisional answer the course counts ("pending+") renders another card than one it does not
# (the course may switch between the two): the state is part of the card's cache key.
_STATE = case((and_(_ans.c.review_state == "pending", _ans.c.score > 0), "pending+"),
              else_=func.coalesce(_ans.c.review_state, _FULL))
_ANSWERED = (select(func.aggregate_strings(cast(_ans.c.position, String) + ":" + cast(_ans.c.id, String) + ":"
                                           + _STATE, ","))
             .where(_ans.c.attempt_id == _att.c.id).scalar_subquery())
_ATTEMPT_VIEW = (
    select(*_ATTEMPT_COLUMNS, _user.c.username, _user.c.display_name,
           exists().where(_member.c.user_id == _user.c.id,
                          _member.c.role == Role.INSTRUCTOR.value).label("is_instructor"),
           _ANSWERED.label("answered"))
    .join(_user, _user.c.id == _att.c.user_id).where(*_OWNED))
_ANSWERS = select(_ans).where(_ans.c.id.in_(bindparam("ids", expanding=True)))
_INSERT = insert(_ans)
_ADD_SCORE = (update(_att).where(_att.c.id == bindparam("aid"), _att.c.status == AttemptStatus.OPEN.value)
              .values(score=_att.c.score + bindparam("points")))


class AnswerRefused(Exception):
    """The answer could not be stored; ``code`` is ``attempt_closed`` or ``already_answered``."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def attempt_row(attempt_id: int, user_id: int, session_version: int | None, for_page: bool = False) -> Any:
    """The attempt's row if ``user_id`` owns it and ``session_version`` is still theirs, else None;
    ``for_page`` adds the owner's name and whether they teach anywhere (the page header).

    The page's read is the whole of its request's SQL (cached cards) and writes nothing: it runs on
    a pooled connection of its own, not through the ORM session, whose set-up, transaction
    bookkeeping and teardown cost more than the statement itself (0.44 -> 0.31 ms a read, measured
    in-process). The answer post reads through the session it stores with."""
    params = {"aid": attempt_id, "uid": user_id, "sv": session_version}
    if for_page:
        with db.engine.connect() as conn:
            return conn.execute(_ATTEMPT_VIEW, params).first()
    return db.session.connection().execute(_ATTEMPT, params).first()


def answered(page_row: Any) -> dict[int, int]:
    """position -> answer id of every stored answer, from ``attempt_row(..., for_page=True)``."""
    return {pos: answer_id for pos, (answer_id, _) in answered_states(page_row).items()}


def answered_states(page_row: Any) -> dict[int, tuple[int, str]]:
    """position -> (answer id, review state or "") of every stored answer: a teacher's review
    changes a stored answer, and its state is part of what its rendered card is cached by
    ("full": fully right, never reviewed)."""
    out = {}
    for item in (page_row.answered or "").split(","):
        if item:
            pos, answer_id, state = (item.split(":") + [""])[:3]
            out[int(pos)] = (int(answer_id), state)
    return out


def answer_rows(answer_ids: list[int]) -> dict[int, Any]:
    """Every column of several stored answers, by id (no query for none)."""
    if not answer_ids:
        return {}
    return {r.id: r for r in db.session.connection().execute(_ANSWERS, {"ids": answer_ids})}


def store_answer(values: dict[str, Any]) -> int:
    """Insert one graded answer and add its score to the open attempt, in one transaction; its id.

    The score update runs first: it takes the attempt's row lock (PostgreSQL) or the write lock
    (SQLite), so two answers of one attempt are counted one after the other, never lost.
    """
    conn = db.session.connection()
    try:
        if conn.execute(_ADD_SCORE, {"aid": values["attempt_id"], "points": values["score"]}).rowcount != 1:
            raise AnswerRefused("attempt_closed")
        answer_id = conn.execute(_INSERT, {**values, "created_at": utcnow()}).inserted_primary_key[0]
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise AnswerRefused("already_answered") from None
    except BaseException:
        db.session.rollback()
        raise
    return answer_id
