"""Assignment and Grade Services: the *counted* score (the gradebook's number: overrides, late
penalties, hand-given points, integrity holds) of each LTI student on each homework and quiz goes
to one line item per item and course, created once and reused.

Invariants: the gradebook is the truth and is read when the job runs, not when it was queued, so
a job that runs late sends the newest number; a push is idempotent (a score equal to the last one
sent is not sent again) and a changed one is sent again; nothing is sent while the item's results
are held back (``server.scores.release``). A failure is stored on the ``LtiGradeSync`` row (the
instructor's passback page lists it with a retry button) and raised, so RQ retries the job.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rq import Queue, Retry
from sqlalchemy import DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from server.scores import release
from server.extensions import db
from server.lti.models import LtiContext, LtiPlatform, LtiUser
from server.models import Course, Membership, Role, utcnow
from server.scores.gradebook import build_gradebook
from server.grading.queue import redis_conn
from server.lti.tool import tool_conf

QUEUE = "distgrade-lti"
AGS_SCOPES = ("https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
              "https://purl.imsglobal.org/spec/lti-ags/scope/score")


class LtiLineItem(db.Model):
    """The platform's line item of one course item (``hw:<id>`` | ``quiz:<id>``), created once."""

    __table_args__ = (UniqueConstraint("context_id", "item"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_context.id"), index=True)
    item: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(String(500))


class LtiGradeSync(db.Model):
    """What was last sent for one student and item, and whether the last try failed."""

    __table_args__ = (UniqueConstraint("context_id", "user_id", "item"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_context.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    item: Mapped[str] = mapped_column(String(200))
    sent_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    state: Mapped[str] = mapped_column(String(12), default="queued", index=True)  # queued|sent|failed|held
    tries: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


def link_lineitem(platform_id: int, context_id: str, item: str, url: str) -> None:
    """A launch's AGS ``lineitem`` claim names the grade column of the link it came from (a link
    placed by hand gets one from the LMS): that column is the item's, so no second one is made."""
    ctx = db.session.scalar(db.select(LtiContext).where(LtiContext.platform_id == platform_id,
                                                        LtiContext.context_id == context_id))
    kind = item.partition(":")[0]
    if ctx is None or kind not in ("hw", "quiz") or len(item) > 200 or not url.startswith(("https://", "http://")):
        return
    row = db.session.scalar(db.select(LtiLineItem).where(LtiLineItem.context_id == ctx.id, LtiLineItem.item == item))
    if row is None:
        db.session.add(LtiLineItem(context_id=ctx.id, item=item, url=url[:500]))
    else:
        row.url = url[:500]  # the column of the link launched most recently


def _contexts(course_id: int) -> list[LtiContext]:
    return [c for c in db.session.scalars(db.select(LtiContext).where(LtiContext.course_id == course_id))
            if (c.services or {}).get("ags")]


def grade_changed(course_id: int, user_id: int | None = None, item: str | None = None) -> int:
    """Queue a passback for the course's LTI students (or one) on every item (or one); returns the
    number of jobs. Cheap when the course came from no LMS: one query, nothing queued."""
    contexts = _contexts(course_id)
    if not contexts:
        return 0
    items = [item] if item else [i.key for i in build_gradebook(db.session.get(Course, course_id)).counted_items]
    q, n = Queue(QUEUE, connection=redis_conn()), 0
    for ctx in contexts:
        # the course's own students from this LMS: not every account the platform ever launched
        users = db.session.scalars(
            db.select(LtiUser.user_id).join(Membership, Membership.user_id == LtiUser.user_id)
            .where(LtiUser.platform_id == ctx.platform_id, Membership.course_id == course_id,
                   Membership.role == Role.STUDENT.value))
        for uid in users:
            if user_id is not None and uid != user_id:
                continue
            for key in items:
                q.enqueue("server.lti.jobs.passback_job", course_id, ctx.id, uid, key, retry=Retry(max=3),
                          job_timeout=120)
                n += 1
    return n


def notify(course_id: int, user_id: int | None = None, item: str | None = None) -> None:
    """``grade_changed`` on every ``server.scores.events.score_changed`` (``create_app`` subscribes it) and on
    "Send grades now": a Redis outage must not fail the grading or the instructor's action (logged; that button
    catches up)."""
    import redis
    from flask import current_app

    try:
        grade_changed(course_id, user_id, item)
    except (redis.exceptions.RedisError, RuntimeError) as err:
        current_app.logger.warning("LTI passback not queued for course %s: %s", course_id, err)


def _sync_row(context_id: int, user_id: int, item: str) -> LtiGradeSync:
    row = db.session.scalar(db.select(LtiGradeSync).where(
        LtiGradeSync.context_id == context_id, LtiGradeSync.user_id == user_id, LtiGradeSync.item == item))
    if row is None:
        row = LtiGradeSync(context_id=context_id, user_id=user_id, item=item)
        db.session.add(row)
    return row


def counted(course: Course, user_id: int, item: str) -> tuple[float | None, float, dict]:
    """(the gradebook cell's counted score, the item's maximum, its title) for one student."""
    book = build_gradebook(course, user_id)
    it = book.item(item)
    if it is None or not book.rows:
        return None, 0.0, {}
    cell = book.rows[0].cells.get(item)
    return (cell.score if cell else None), float(it.max_score or 0.0), it.title


def push(course_id: int, context_id: int, user_id: int, item: str) -> str:
    """Send the student's counted score for the item if it changed; returns what happened."""
    course = db.session.get(Course, course_id)
    ctx = db.session.get(LtiContext, context_id)
    row = _sync_row(context_id, user_id, item)
    if not release.is_released(course_id, item):
        row.state, row.updated_at = "held", utcnow()
        db.session.commit()
        return "held"
    score, top, title = counted(course, user_id, item)
    if score is None or (row.state == "sent" and row.sent_score == score):
        db.session.commit()
        return "unchanged"
    try:
        _send(ctx, user_id, item, score, top, title)
    except Exception as err:  # stored for the instructor, then raised for RQ's retry
        row.state, row.tries, row.error, row.updated_at = "failed", (row.tries or 0) + 1, str(err)[:2000], utcnow()
        db.session.commit()
        raise
    row.state, row.sent_score, row.error, row.updated_at = "sent", score, "", utcnow()
    row.tries = (row.tries or 0) + 1
    db.session.commit()
    return "sent"


def _service(ctx: LtiContext):
    from pylti1p3.assignments_grades import AssignmentsGradesService
    from pylti1p3.service_connector import ServiceConnector


    platform = db.session.get(LtiPlatform, ctx.platform_id)
    registration = tool_conf().find_registration_by_params(platform.issuer, platform.client_id)
    return AssignmentsGradesService(ServiceConnector(registration), ctx.services["ags"])


def _send(ctx: LtiContext, user_id: int, item: str, score: float, top: float, title: dict) -> None:
    from pylti1p3.grade import Grade
    from pylti1p3.lineitem import LineItem

    ags = _service(ctx)
    sub = db.session.scalar(db.select(LtiUser.sub).join(LtiPlatform, LtiPlatform.id == LtiUser.platform_id)
                            .where(LtiUser.user_id == user_id, LtiUser.platform_id == ctx.platform_id))
    stored = db.session.scalar(db.select(LtiLineItem).where(LtiLineItem.context_id == ctx.id, LtiLineItem.item == item))
    if stored is None:
        label = (title or {}).get("en") or item
        lineitem = ags.find_or_create_lineitem(
            LineItem().set_tag(item).set_resource_id(item).set_label(label).set_score_maximum(top))
        stored = LtiLineItem(context_id=ctx.id, item=item, url=lineitem.get_id())
        db.session.add(stored)
        db.session.flush()
    lineitem = LineItem({"id": stored.url, "scoreMaximum": top, "label": item})
    grade = (Grade().set_score_given(score).set_score_maximum(top).set_user_id(sub)
             .set_timestamp(datetime.now(timezone.utc).isoformat()).set_activity_progress("Completed")
             .set_grading_progress("FullyGraded"))
    ags.put_grade(grade, lineitem)


def failures(course_id: int) -> list[Any]:
    """The course's failed pushes (for the instructor's page)."""
    return list(db.session.scalars(db.select(LtiGradeSync).join(LtiContext, LtiContext.id == LtiGradeSync.context_id)
                                   .where(LtiContext.course_id == course_id, LtiGradeSync.state == "failed")))
