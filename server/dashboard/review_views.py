"""The free-text review queue: per question, groups of similar answers the rubric was unsure of
(or a student asked about); one decision grades the whole group. Keyboard: J / K move between
groups, F full marks, Z zero, P types a partial score (Enter saves). Homework 2's unsure
annotations have a page of their own with the same groups and keys (``review_annotation``)."""
from __future__ import annotations

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user

from coursework.quiz.bank import BankError, load_question
from server.access import course_or_404
from server.dashboard.views import bp
from server.dashboard import review_annotation
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
    annotation_groups = review_annotation.groups(course.id)
    annotations = {"pending": sum(len(g.items) for g in annotation_groups), "groups": len(annotation_groups)}
    return render_template("dashboard/review.html", course=course, rows=rows, annotations=annotations)


@bp.route("/<code>/review/annotations")
def review_annotations(code: str):
    """Homework annotations waiting for a teacher, grouped, with the reading each got."""
    course = course_or_404(code, instructor=True)
    return render_template("dashboard/review_annotation.html", course=course,
                           groups=review_annotation.groups(course.id))


@bp.post("/<code>/review/annotations/decide")
def review_annotation_decide(code: str):
    """One decision for a group of annotations: full, zero, or a share of each one's points."""
    course = course_or_404(code, instructor=True)
    try:
        items = []
        for raw in request.form.getlist("item"):
            sid, _sep, check_id = raw.partition(":")
            items.append((int(sid), check_id))
        verdict = request.form.get("verdict")
        fraction = 1.0 if verdict == "full" else 0.0 if verdict == "zero" else float(request.form.get("percent", "")) / 100
        n = review_annotation.decide(course.id, items, fraction, current_user.id, request.form.get("group", ""))
    except review_annotation.DecisionError as e:
        flash(_("Tick at least one answer that is still open: nothing was graded.") if e.code == "nothing_open"
              else _("Choose full marks, zero, or a share of the points from 0 to 100."), "error")
        return redirect(url_for("dashboard.review_annotations", code=code))
    except ValueError:
        flash(_("Choose full marks, zero, or a share of the points from 0 to 100."), "error")
        return redirect(url_for("dashboard.review_annotations", code=code))
    flash(ngettext("%(num)d answer graded.", "%(num)d answers graded.", n), "ok")
    return redirect(url_for("dashboard.review_annotations", code=code))


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
    except review.ReviewError as e:
        flash(_("Tick at least one answer that is still open: nothing was graded.") if e.code == "nothing_open"
              else _("Choose full marks, zero, or points between 0 and the question's maximum."), "error")
        return redirect(url_for("dashboard.review_question", code=code, question_id=question_id))
    except ValueError:
        flash(_("Choose full marks, zero, or points between 0 and the question's maximum."), "error")
        return redirect(url_for("dashboard.review_question", code=code, question_id=question_id))
    flash(ngettext("%(num)d answer graded.", "%(num)d answers graded.", n), "ok")
    return redirect(url_for("dashboard.review_question", code=code, question_id=question_id))
