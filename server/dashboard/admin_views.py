"""Dashboard actions that change scores and rules: overrides, manual cell grading, homework
settings and extensions; plus the audit log and the grading queue's health."""
from __future__ import annotations

from datetime import datetime

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from server.access import course_or_404, course_submission_or_404, settings_or_404, student_or_404
from server.scores import actions
from server.scores.gradebook import build_gradebook
from server.scores.models import AuditEntry, Extension
from server.dashboard.queue_health import queue_health
from server.dashboard.views import bp
from server.extensions import db
from server.homework.views import report_context
from server.models import User
from server.dashboard.calibration_views import measuring_now


def _messages(top: float | None = None) -> dict[str, str]:
    return {"reason_required": _("A reason is required for every manual change."),
            "above_max": _("Enter a score between 0 and %(max)s, this item's maximum; nothing was changed.",
                           max=f"{top or 0:g}"),
            "bad_score": _("Enter a score between 0 and the maximum."),
            "no_such_cell": _("That cell is not in this submission's report."),
            "bad_settings": _("Check the settings: at least one attempt, a penalty between 0 and 1, policy best or last."),
            "bad_date": _("Enter the date as YYYY-MM-DD HH:MM (UTC).")}


def _parse_when(value: str) -> datetime | None:
    value = (value or "").strip().replace("T", " ")
    if not value:
        return None
    for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"):
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    raise actions.ActionError("bad_date")


@bp.post("/<code>/students/<username>/override")
def override(code: str, username: str):
    """Set or clear the score of one gradebook cell, with a required reason."""
    course = course_or_404(code, instructor=True)
    user = student_or_404(course.id, username)
    item = request.form.get("item", "")
    book = build_gradebook(course)
    if book.item(item) is None:
        abort(404)
    row = next(r for r in book.rows if r.user_id == user.id)
    cell = row.cells.get(item)
    computed = cell.computed if cell else None
    try:
        if request.form.get("action") == "clear":
            actions.clear_override(course.id, user.id, item, request.form.get("reason", ""), current_user.id, computed)
            flash(_("Override removed; the computed score counts again."), "info")
        else:
            actions.set_override(course.id, user.id, item, request.form.get("score"), request.form.get("reason", ""),
                                 current_user.id, computed, top=book.item(item).max_score)
            flash(_("Score overridden and recorded in the audit log."), "info")
    except actions.ActionError as err:
        flash(_messages(book.item(item).max_score)[err.code], "error")
        return redirect(url_for("dashboard.student", code=code, username=username, _anchor="items")), 303
    return redirect(url_for("dashboard.student", code=code, username=username, _anchor="items"))


@bp.route("/<code>/submissions/<int:submission_id>/manual", methods=["GET", "POST"])
def manual_grading(code: str, submission_id: int):
    """Grade the free-text cells a grader left for a person (``evidence.manual_cells``)."""
    course = course_or_404(code, instructor=True)
    sub = course_submission_or_404(course.id, submission_id)
    cells = actions.manual_cells(sub.report_json)
    status = 200
    if request.method == "POST":
        cell_id = request.form.get("cell_id", "")
        try:
            actions.set_cell_score(sub, cell_id, request.form.get("score"), request.form.get("comment", ""),
                                   current_user.id)
            flash(_("Cell %(cell)s graded.", cell=cell_id), "info")
            return redirect(url_for("dashboard.manual_grading", code=code, submission_id=sub.id,
                                    _anchor=f"cell-{cell_id}"))
        except actions.ActionError as err:
            flash(_messages()[err.code], "error")
            status = 400
    return render_template("dashboard/manual.html", course=course, sub=sub, cells=cells,
                           scores=actions.cell_scores(sub.id), ctx=report_context(sub)), status


@bp.post("/<code>/homework/<assignment_id>/settings")
def homework_settings(code: str, assignment_id: str):
    """Deadline, attempt limit, late penalty per day and score policy of one homework."""
    course = course_or_404(code, instructor=True)
    ca = settings_or_404(course.id, assignment_id)
    try:
        actions.update_settings(ca, deadline=_parse_when(request.form.get("deadline", "")),
                                attempt_limit=request.form.get("attempt_limit", type=int) or 0,
                                late_penalty_per_day=request.form.get("late_penalty_per_day", type=float) or 0.0,
                                score_policy=request.form.get("score_policy", "best"))
        flash(_("Settings saved."), "info")
    except actions.ActionError as err:
        flash(_messages()[err.code], "error")
    return redirect(url_for("dashboard.homework_stats", code=code, assignment_id=assignment_id, _anchor="settings"))


@bp.post("/<code>/homework/<assignment_id>/extensions")
def homework_extension(code: str, assignment_id: str):
    """Grant (or with ``remove``, withdraw) one student's extension."""
    course = course_or_404(code, instructor=True)
    ca = settings_or_404(course.id, assignment_id)
    user = student_or_404(course.id, request.form.get("username", "").strip())
    if request.form.get("remove"):
        db.session.execute(db.delete(Extension).where(Extension.course_assignment_id == ca.id,
                                                      Extension.user_id == user.id))
        db.session.commit()
        flash(_("Extension withdrawn."), "info")
    else:
        try:
            deadline = _parse_when(request.form.get("deadline", ""))
            if deadline is None:
                raise actions.ActionError("bad_date")
            actions.set_extension(ca, user.id, deadline, request.form.get("reason", ""), current_user.id)
            flash(_("Extension granted to %(user)s.", user=user.username), "info")
        except actions.ActionError as err:
            flash(_messages()[err.code], "error")
    return redirect(url_for("dashboard.homework_stats", code=code, assignment_id=assignment_id, _anchor="extensions"))


@bp.route("/<code>/audit")
def audit(code: str):
    """Every manual score change in the course, newest first."""
    course = course_or_404(code, instructor=True)
    student, actor = db.aliased(User), db.aliased(User)
    entries = db.session.execute(
        db.select(AuditEntry, student.username, actor.username)
        .join(student, student.id == AuditEntry.user_id).join(actor, actor.id == AuditEntry.actor_id)
        .where(AuditEntry.course_id == course.id).order_by(AuditEntry.at.desc(), AuditEntry.id.desc())
        .limit(500)).all()
    return render_template("dashboard/audit.html", course=course, entries=entries)


@bp.route("/<code>/queue")
def queue(code: str):
    """Queued / running / failed jobs, RQ queues, workers and their GPUs, oldest job age."""
    course = course_or_404(code, instructor=True)

    return render_template("dashboard/queue.html", course=course, health=queue_health(), measuring=measuring_now())
