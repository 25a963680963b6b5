"""``/api/submissions/<id>``: the status a submission's page polls once a second.

Login is enforced by ``auth.require_login`` (an anonymous call gets 401 JSON, not a
redirect); another student's id is a 404, exactly like the page.
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, url_for
from sqlalchemy import bindparam, exists, or_, select

from server.auth.views import session_user_id
from server.extensions import db
from server.homework.rules import elapsed_s
from server.models import STATUS_COLUMNS, Membership, Role, Submission, SubmissionStatus, status_dict
from server.queue import queue_place

bp = Blueprint("api", __name__, url_prefix="/api")


def status_payload(sub: Any) -> dict[str, Any]:
    """``status_dict`` plus what the status page shows: queue position, elapsed time, report link."""
    data = status_dict(sub)
    data.update(queue_place(sub))  # queue_position and eta_s (expected start, seconds)
    data["elapsed_s"] = elapsed_s(sub)
    if sub.status in (SubmissionStatus.GRADED.value, SubmissionStatus.ERROR.value):
        data["report_url"] = url_for("homework.report", submission_id=sub.id)
    return data


def _status_query():
    """Built once: the status columns of one submission, if the user owns it or teaches its course.

    A plain Core statement over the tables with bound parameters: the ORM's per-call statement
    construction and cache-key work was most of this endpoint's cost.
    """
    sub, member = Submission.__table__, Membership.__table__
    teaches = exists().where(member.c.user_id == bindparam("uid"), member.c.course_id == sub.c.course_id,
                             member.c.role == Role.INSTRUCTOR.value)
    return (select(*(sub.c[c] for c in STATUS_COLUMNS))
            .where(sub.c.id == bindparam("sid"), or_(sub.c.user_id == bindparam("uid"), teaches)))


_STATUS_QUERY = _status_query()


def visible_status_row(submission_id: int, user_id: int) -> Any:
    """The submission's status columns if ``user_id`` owns it or teaches its course, else None.

    Every open status page polls this once a second, so it is one indexed query returning a
    plain row: no user object, no ORM instance, no file or report columns.
    """
    return db.session.connection().execute(_STATUS_QUERY, {"sid": submission_id, "uid": user_id}).first()


@bp.route("/submissions/<int:submission_id>")
def submission_status(submission_id: int):
    """The submission's status as JSON (never cached: it changes every second while running)."""
    row = visible_status_row(submission_id, int(session_user_id()))
    if row is None:
        abort(404)  # 404, not 403: other students' ids reveal nothing
    return status_payload(row), 200, {"Cache-Control": "no-store"}
