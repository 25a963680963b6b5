"""``/api/submissions/<id>``: the status a submission's page polls once a second.

Login is enforced by ``auth.require_login`` (an anonymous call gets 401 JSON, not a
redirect); another student's id is a 404, exactly like the page.
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, session, url_for
from sqlalchemy import bindparam, exists, or_, select

from server.auth.views import checks_session_version, session_is_current, session_user_id
from server.extensions import db
from server.homework.rules import elapsed_s
from server.models import FINISHED_STATUSES, PENDING_STATUSES, STATUS_COLUMNS, Membership, Role, Submission, User, status_dict
from server.grading.lifecycle import host_lost
from server.grading.queue import queue_place
from server.scores.release import holding_mode, mode_releases

bp = Blueprint("api", __name__, url_prefix="/api")


def status_payload(sub: Any) -> dict[str, Any]:
    """``status_dict`` plus what the status page shows: queue position, elapsed time, report link."""
    data = status_dict(sub)
    data.update(queue_place(sub))  # queue_position and eta_s (expected start, seconds)
    data["elapsed_s"] = elapsed_s(sub)
    # A running submission whose worker went silent: nothing runs, say so and when it is retried.
    retry_in = host_lost(sub)
    data["host_lost"] = retry_in is not None
    data["retry_in_s"] = retry_in
    if sub.status in FINISHED_STATUSES:
        data["report_url"] = url_for("homework.report", submission_id=sub.id)
    if sub.status not in PENDING_STATUSES and _phase(sub.progress_json) not in (None, "done"):
        data["progress"] = None  # a final state never shows a running phase (rows stored before that held)
    return data


def _phase(progress: Any) -> Any:
    return progress.get("phase") if isinstance(progress, dict) else None


def _status_query():
    """Built once: the status columns of one submission, if the user owns it or teaches its course.

    A plain Core statement over the tables with bound parameters: the ORM's per-call statement
    construction and cache-key work was most of this endpoint's cost.
    The session's version is checked in the same statement (a revoked session finds nothing),
    so a signed-in poll stays one query.
    """
    sub, member, user = Submission.__table__, Membership.__table__, User.__table__
    teaches = exists().where(member.c.user_id == bindparam("uid"), member.c.course_id == sub.c.course_id,
                             member.c.role == Role.INSTRUCTOR.value)
    current = exists().where(user.c.id == bindparam("uid"), user.c.session_version == bindparam("sv"))
    # The homework's release rule and whether the caller teaches, in the same statement: a finished
    # poll paid two more queries for them (the ORM's statement building was most of its cost).
    holding = holding_mode(sub.c.course_id, "hw:" + sub.c.assignment_id)
    return (select(*(sub.c[c] for c in STATUS_COLUMNS), holding.label("release_mode"), teaches.label("teaches"))
            .where(sub.c.id == bindparam("sid"), or_(sub.c.user_id == bindparam("uid"), teaches), current))


_STATUS_QUERY = _status_query()


def visible_status_row(submission_id: int, user_id: int, session_version: int) -> Any:
    """The submission's status columns if ``user_id`` owns it or teaches its course and the
    session is at the user's current version, else None.

    Every open status page polls this once a second, so it is one indexed query returning a
    plain row: no user object, no ORM instance, no file or report columns.
    """
    return db.session.connection().execute(
        _STATUS_QUERY, {"sid": submission_id, "uid": user_id, "sv": session_version}).first()


@bp.route("/submissions/<int:submission_id>")
@checks_session_version
def submission_status(submission_id: int):
    """The submission's status as JSON (never cached: it changes every second while running)."""
    row = visible_status_row(submission_id, int(session_user_id()), session["_sv"])
    if row is None:
        if not session_is_current():  # only a miss pays a second query: revoked (401) or not yours (404)
            return {"error": "login required"}, 401
        abort(404)  # 404, not 403: other students' ids reveal nothing
    data = status_payload(row)
    if row.status in FINISHED_STATUSES:
        # Only a finished poll pays for this: a held-back score stays off the wire (server.scores.release).
        data["released"] = (row.user_id != int(session_user_id())
                            or mode_releases(row.release_mode, row.course_id, f"hw:{row.assignment_id}"))
        if not data["released"] and not row.teaches:
            data["score"] = data["max_score"] = None
        else:
            data["released"] = True
    return data, 200, {"Cache-Control": "no-store"}

