"""The instructor's release control for one homework or quiz (``server.scores.release``): choose when
students see scores and feedback, publish now (one click) or withdraw a publication. Every change
is logged; a refused change says why and changes nothing (400)."""
from __future__ import annotations

from flask import abort, flash, redirect, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from coursework.quiz.bank import BankError, load_quiz
from server.scores import release
from server.access import course_or_404, settings_or_404
from server.dashboard.views import bp
from server.dashboard import item_views


def _errors() -> dict[str, str]:
    return {"bad_mode": _("Choose when results are shown: at once, after the deadline, or when you publish."),
            "bad_item": _("No such homework or quiz."),
            "nothing_to_undo": _("There is no publication to withdraw."),
            "bad_action": _("Unknown action.")}


def _done() -> dict[str, str]:
    return {"mode": _("Saved: when students see results."), "publish": _("Released: students see the results now."),
            "withdraw": _("Publication withdrawn: students no longer see the results, unless the release rule shows them anyway.")}


@bp.post("/<code>/homework/<assignment_id>/release")
def release_homework(code: str, assignment_id: str):
    """Apply one release action to a homework of the course."""
    settings_or_404(course_or_404(code, instructor=True).id, assignment_id)
    return _apply(code, "hw", assignment_id)


@bp.post("/<code>/quiz/<quiz_id>/release")
def release_quiz(code: str, quiz_id: str):
    """Apply one release action to a quiz."""
    course_or_404(code, instructor=True)
    try:
        load_quiz(quiz_id)
    except BankError:
        abort(404)
    return _apply(code, "quiz", quiz_id)


def _apply(code: str, kind: str, ref: str):
    """One release action (``mode`` with a ``mode`` field, ``publish`` or ``withdraw``)."""
    course = course_or_404(code, instructor=True)
    item, action = f"{kind}:{ref}", request.form.get("action", "")
    try:
        if action == "mode":
            release.set_mode(course.id, item, request.form.get("mode", ""), current_user.id)
        elif action == "publish":
            release.publish(course.id, item, current_user.id)
        elif action == "withdraw":
            release.withdraw(course.id, item, current_user.id)
        else:
            raise release.ReleaseError("bad_action")
    except release.ReleaseError as err:
        flash(_errors()[err.code] + " " + _("Nothing was changed."), "error")
        return _stats_page(code, kind, ref), 400
    flash(_done()[action], "ok")
    return redirect(_stats_url(code, kind, ref))


def _stats_url(code: str, kind: str, ref: str) -> str:
    if kind == "hw":
        return url_for("dashboard.homework_stats", code=code, assignment_id=ref, _anchor="release")
    return url_for("dashboard.quiz_stats", code=code, quiz_id=ref, _anchor="release")


def _stats_page(code: str, kind: str, ref: str) -> str:
    return item_views.homework_stats(code, ref) if kind == "hw" else item_views.quiz_stats(code, ref)


@bp.app_context_processor
def release_helpers() -> dict:
    """``release_state(course_id, item)`` and ``release_log(course_id, item)`` for the settings card."""
    return {"release_state": release.state, "release_log": lambda cid, item: release.events(cid, item, 10)}
