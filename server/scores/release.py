"""Release control: when students see the scores and feedback of a homework or a quiz.

One setting per course item (``hw:<assignment_id>`` or ``quiz:<quiz_id>``, the gradebook's keys):

* ``immediate`` (the default, and what an item without a row gets): shown as soon as graded;
* ``after_deadline``: shown once the item's last deadline has passed. For a homework that is
  the latest of the course deadline and every extension granted, because a reference answer
  shown to an early student would reach a classmate who is still working;
* ``manual``: shown when the instructor publishes.

An instructor may also publish early (either deferred mode) and withdraw a publication (undo).
Every change appends a ``ReleaseEvent`` (who, when, what): the audit of releases.

Until an item is released its students see that a submission was graded (and when, and how
long it ran), never its score, its checks' verdicts, hints or reference answers. Staff always
see everything. The pages, the status API, the exports and (later) LTI passback all ask
``is_released`` / ``hidden_items`` here, so the rule lives in one place. This is a separate
setting from a quiz's "reference answers shown": that one hides answers for good,
this one only until release.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any
from enum import Enum

from sqlalchemy import DateTime, ForeignKey, String, UniqueConstraint, func
from sqlalchemy.orm import Mapped, mapped_column

from coursework.quiz.bank import BankError, load_quiz
from server.extensions import db
from server.scores import events as score_events
from server.models import CourseAssignment, utcnow
from server.scores.models import Extension
from server.models import User


class ReleaseMode(str, Enum):
    IMMEDIATE = "immediate"
    AFTER_DEADLINE = "after_deadline"
    MANUAL = "manual"


class ReleaseSetting(db.Model):
    """How one course item's results reach its students; no row means ``immediate``."""

    __table_args__ = (UniqueConstraint("course_id", "item"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    item: Mapped[str] = mapped_column(String(200))  # "hw:<assignment_id>" | "quiz:<quiz_id>"
    mode: Mapped[str] = mapped_column(String(20), default=ReleaseMode.IMMEDIATE.value)
    published_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    published_by: Mapped[int | None] = mapped_column(ForeignKey("user.id"), nullable=True)


class ReleaseEvent(db.Model):
    """One change of a release setting: append-only, never edited."""

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    item: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(40))  # "mode:<mode>" | "publish" | "withdraw"
    actor_id: Mapped[int] = mapped_column(ForeignKey("user.id"))
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ReleaseError(ValueError):
    """A refused change; ``code`` names why (``bad_mode``, ``bad_item``, ``nothing_to_undo``)."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def _quiz_closes(quiz_id: str) -> datetime | None:
    try:
        return load_quiz(quiz_id).closes
    except BankError:
        return None


def last_deadline(course_id: int, item: str) -> datetime | None:
    """The moment after which nobody in the course can still hand the item in (None: no deadline):
    a homework's course deadline or its latest extension; a quiz's closing time."""
    kind, _, ref = item.partition(":")
    if kind == "quiz":
        return _quiz_closes(ref)

    ca = db.session.scalar(db.select(CourseAssignment).where(
        CourseAssignment.course_id == course_id, CourseAssignment.assignment_id == ref))
    if ca is None or ca.deadline is None:
        return None
    latest = db.session.scalar(db.select(func.max(Extension.deadline)).where(
        Extension.course_assignment_id == ca.id))
    return max(ca.deadline, latest) if latest else ca.deadline


def setting(course_id: int, item: str) -> ReleaseSetting | None:
    return db.session.scalar(db.select(ReleaseSetting).where(
        ReleaseSetting.course_id == course_id, ReleaseSetting.item == item))


def _released(row: ReleaseSetting | None, course_id: int, item: str, now: datetime) -> bool:
    if row is None or row.mode == ReleaseMode.IMMEDIATE.value or row.published_at is not None:
        return True
    if row.mode == ReleaseMode.AFTER_DEADLINE.value:
        due = last_deadline(course_id, item)
        # no deadline at all: nothing to wait for but the instructor
        return due is not None and now >= due
    return False


def holding_mode(course_id: Any, item: Any) -> Any:
    """A scalar subquery for a caller's own statement: the item's release mode while it holds results
    back (unpublished and not immediate), NULL when they are shown. Pass its value to ``mode_releases``;
    a hot path then pays no query of its own for the release rule."""
    rel = ReleaseSetting.__table__
    return (db.select(rel.c.mode).where(rel.c.course_id == course_id, rel.c.item == item,
                                        rel.c.mode != ReleaseMode.IMMEDIATE.value, rel.c.published_at.is_(None))
            .scalar_subquery())


def mode_releases(holding_mode: str | None, course_id: int | None, item: str) -> bool:
    """``is_released`` for a caller that read the rule in its own statement: ``holding_mode`` is the
    item's mode while unpublished and not immediate (None: released). Only ``after_deadline``
    still needs the deadline (a quiz's comes from its file, no query)."""
    if holding_mode is None or course_id is None:
        return True
    if holding_mode == ReleaseMode.AFTER_DEADLINE.value:
        due = last_deadline(course_id, item)
        return due is not None and utcnow() >= due
    return False


def is_released(course_id: int | None, item: str, now: datetime | None = None) -> bool:
    """True when the item's students may see its scores and feedback now."""
    if course_id is None:
        return True  # an attempt outside any course (practice without enrolment) has no one to wait for
    return _released(setting(course_id, item), course_id, item, now or utcnow())


def hidden_items(course_id: int, now: datetime | None = None) -> set[str]:
    """The course's items whose results students may not see yet (one query for the settings)."""
    now = now or utcnow()
    rows = db.session.scalars(db.select(ReleaseSetting).where(
        ReleaseSetting.course_id == course_id, ReleaseSetting.mode != ReleaseMode.IMMEDIATE.value,
        ReleaseSetting.published_at.is_(None))).all()
    return {r.item for r in rows if not _released(r, course_id, r.item, now)}


def state(course_id: int, item: str) -> dict:
    """What the instructor's settings form shows: mode, released now, published at, due."""
    row = setting(course_id, item)
    mode = row.mode if row else ReleaseMode.IMMEDIATE.value
    return {"item": item, "mode": mode, "released": is_released(course_id, item),
            "published_at": row.published_at if row else None,
            "releases_at": last_deadline(course_id, item) if mode == ReleaseMode.AFTER_DEADLINE.value else None}


def _check_item(item: str) -> None:
    kind, _, ref = item.partition(":")
    if kind not in ("hw", "quiz") or not ref or len(item) > 200:
        raise ReleaseError("bad_item")


def _row_for(course_id: int, item: str) -> ReleaseSetting:
    row = setting(course_id, item)
    if row is None:
        row = ReleaseSetting(course_id=course_id, item=item, mode=ReleaseMode.IMMEDIATE.value)
        db.session.add(row)
    return row


def _log(course_id: int, item: str, action: str, actor_id: int) -> None:
    db.session.add(ReleaseEvent(course_id=course_id, item=item, action=action, actor_id=actor_id))


def set_mode(course_id: int, item: str, mode: str, actor_id: int) -> None:
    """Choose when the item is released (audited; an unchanged mode logs nothing)."""
    _check_item(item)
    if mode not in {m.value for m in ReleaseMode}:
        raise ReleaseError("bad_mode")
    row = _row_for(course_id, item)
    if row.mode != mode:
        row.mode = mode
        _log(course_id, item, f"mode:{mode}", actor_id)
    db.session.commit()


def publish(course_id: int, item: str, actor_id: int) -> None:
    """Release the item now, whatever its mode (one click, audited)."""
    _check_item(item)
    row = _row_for(course_id, item)
    if row.published_at is None:
        row.published_at, row.published_by = utcnow(), actor_id
        _log(course_id, item, "publish", actor_id)
    db.session.commit()
    score_events.changed(course_id, item=item)


def withdraw(course_id: int, item: str, actor_id: int) -> None:
    """Undo a publication: the item is hidden again unless its mode shows it anyway."""
    _check_item(item)
    row = setting(course_id, item)
    if row is None or row.published_at is None:
        raise ReleaseError("nothing_to_undo")
    row.published_at, row.published_by = None, None
    _log(course_id, item, "withdraw", actor_id)
    db.session.commit()


def events(course_id: int, item: str | None = None, limit: int = 50) -> list[tuple[ReleaseEvent, str]]:
    """The newest release changes of a course (or one item) with who made each, newest first."""
    q = (db.select(ReleaseEvent, User.username).join(User, User.id == ReleaseEvent.actor_id)
         .where(ReleaseEvent.course_id == course_id))
    if item:
        q = q.where(ReleaseEvent.item == item)
    return [tuple(r) for r in db.session.execute(q.order_by(ReleaseEvent.id.desc()).limit(limit))]

