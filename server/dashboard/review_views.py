"""The free-text review queue: per question, groups of similar answers the rubric was unsure of
(or a student asked about); one decision grades the whole group. Keyboard: J / K move between
groups, F full marks, Z zero, P types a partial score (Enter saves)."""
from __future__ import annotations

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from coursework.quiz.bank import BankError, load_question
from server.access import course_or_404
from server.dashboard.views import bp
from server.quiz import review


def _question_or_404(question_id: str):
    try:
        q = load_question(question_id)
    except BankError:
        abort(404)
    if q.type != "text":
        abort(404)
    return q


@bp.route("/<code>/review/")
def review_queue(code: str):
    """Every free-text question with answers waiting for a teacher."""
    course = course_or_404(code, instructor=True)
    counts = review.queue_counts(course.id)
    rows = [{"qid": qid, "title": load_question(qid).info.get("title", {}), **c} for qid, c in sorted(counts.items())]
    return render_template("dashboard/review.html", course=course, rows=rows)


@bp.route("/<code>/review/<path:question_id>")
def review_question(code: str, question_id: str):
    """The open groups of one question, largest first, with the rubric's reading."""
    course = course_or_404(code, instructor=True)
    q = _question_or_404(question_id)
    groups = review.groups_for(course.id, question_id)
    return render_template("dashboard/review_question.html", course=course, q=q, qid=question_id, groups=groups)


@bp.post("/<code>/review/<path:question_id>/decide")
def review_decide(code: str, question_id: str):
    """One decision for a group: full, zero, or a partial share of the points."""
    course = course_or_404(code, instructor=True)
    q = _question_or_404(question_id)
    try:
        ids = [int(i) for i in request.form.getlist("answer_id")]
        if request.form.get("verdict") == "full":
            fraction = 1.0
        elif request.form.get("verdict") == "zero":
            fraction = 0.0
        else:
            fraction = float(request.form.get("points", "")) / q.points
        n = review.decide(course.id, question_id, ids, fraction, current_user.id, request.form.get("group", ""))
    except (ValueError, review.ReviewError):
        flash(_("Choose full marks, zero, or points between 0 and the question's maximum."), "error")
        return redirect(url_for("dashboard.review_question", code=code, question_id=question_id))
    flash(_("%(n)d answers graded.", n=n), "ok")
    return redirect(url_for("dashboard.review_question", code=code, question_id=question_id))
