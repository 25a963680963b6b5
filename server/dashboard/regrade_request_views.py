"""The instructor's queue of regrade requests per check (``server.scores.regrade_requests``): each open
request with the report, the check, the student's reason and two answers, rerun the grader or
change the check's score with a reply. A refused answer says why and changes nothing (400)."""
from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from server.scores import regrade_requests as rr
from server.access import course_or_404
from server.dashboard.views import bp


def _errors() -> dict[str, str]:
    return {"not_found": _("No such regrade request in this course."),
            "already_answered": _("This request has already been answered."),
            "bad_points": _("Give the check's new points, between 0 and its maximum."),
            "bad_reply": _("Write a reply for the student (at most 1000 characters)."),
            "bad_action": _("Unknown action.")}


def _page(course, status: int = 200):
    rows = []
    for req, sub, username in rr.open_requests(course.id):
        check = next((c for c in (sub.report_json or {}).get("checks", []) if c.get("id") == req.check_id), {})
        rows.append({"req": req, "sub": sub, "username": username, "check": check})
    return render_template("dashboard/regrade_requests.html", course=course, rows=rows), status


@bp.route("/<code>/regrade-requests", methods=["GET", "POST"])
def regrade_requests(code: str):
    """GET: the open requests, oldest first. POST: answer one (``request`` id, ``action`` rerun|score)."""
    course = course_or_404(code, instructor=True)
    if request.method == "GET":
        return _page(course)
    action, reply = request.form.get("action", ""), request.form.get("reply", "")
    try:
        request_id = int(request.form.get("request", ""))
    except ValueError:
        request_id = 0
    try:
        if action == "score":
            rr.answer_with_score(course.id, request_id, request.form.get("points"), reply, current_user.id)
            flash(_("Answered: the check's new points count in the gradebook, and the student sees your reply."), "ok")
        elif action == "rerun":
            rr.answer_with_rerun(course.id, request_id, reply, current_user.id)
            flash(_("The submission is back in the grading queue; the student sees the new result when it is ready."), "ok")
        else:
            raise rr.RequestError("bad_action")
    except rr.RequestError as err:
        flash(_errors()[err.code] + " " + _("Nothing was changed."), "error")
        return _page(course, 400)
    return redirect(url_for("dashboard.regrade_requests", code=code))
