"""``/api/submissions/<id>``: the status a submission's page polls once a second.

Login is enforced by ``auth.require_login`` (an anonymous call gets 401 JSON, not a
redirect); another student's id is a 404, exactly like the page.
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, url_for

from server.access import submission_or_404
from server.homework.rules import elapsed_s
from server.models import Submission, SubmissionStatus
from server.queue import queue_position

bp = Blueprint("api", __name__, url_prefix="/api")


def status_payload(sub: Submission) -> dict[str, Any]:
    """``to_status_dict`` plus what the status page shows: queue position, elapsed time, report link."""
    data = sub.to_status_dict()
    data["queue_position"] = queue_position(sub)
    data["elapsed_s"] = elapsed_s(sub)
    if sub.status in (SubmissionStatus.GRADED.value, SubmissionStatus.ERROR.value):
        data["report_url"] = url_for("homework.report", submission_id=sub.id)
    return data


@bp.route("/submissions/<int:submission_id>")
def submission_status(submission_id: int):
    """The submission's status as JSON (never cached: it changes every second while running)."""
    sub = submission_or_404(submission_id)
    return status_payload(sub), 200, {"Cache-Control": "no-store"}
