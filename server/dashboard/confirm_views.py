"""Confirming is cheap: one key confirms a review group's suggestion (C), and a large group can
be settled from a random sample the teacher reads (S; sample size: ``coursework.review_sampling``).

Kept beside the review queue's own decide route (``review_views``), which it does not change:
the review page's buttons post here with ``formaction``. Only the answers the teacher read are
labelled examples (``server.quiz.labels``); answers settled by a sample take the decision but
teach the readers nothing.
"""
from __future__ import annotations

from flask import flash, redirect, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user

from coursework import trust
from coursework.review_sampling import READ_ALL_UP_TO, sample, sample_size
from server.access import course_or_404
from server.dashboard.review_views import _question_or_404
from server.dashboard.views import bp
from server.quiz import labels, review
from server.dashboard import review_annotation


def suggestion(rows: list) -> float | None:
    """The share every one of ``rows`` was given by its readers (None when they differ)."""
    shares = {round(float((r.details_json or {}).get("provisional_fraction",
                                                     (r.auto_score or 0.0) / r.max_score if r.max_score else 0.0)), 4)
              for r in rows}
    if not shares or max(shares) - min(shares) > trust.DEFAULT_RULE.tolerance:
        return None
    return min(shares)


@bp.app_template_global("review_sample")
def review_sample(answers: list, key: str) -> list:
    """The answers of a large group the teacher reads before the rest settle (none for a small group)."""
    return sample(answers, key) if len(answers) > READ_ALL_UP_TO else []


@bp.app_template_global("review_read_all_up_to")
def review_read_all_up_to() -> int:
    """The largest group read whole: S (settle from a sample) applies only to larger ones."""
    return READ_ALL_UP_TO


@bp.app_template_global("review_suggestion")
def review_suggestion(answers: list) -> float | None:
    return suggestion(answers)


@bp.post("/<code>/review/<path:question_id>/confirm")
def review_confirm(code: str, question_id: str):
    """``verdict=suggested``: the ticked answers get their (common) suggestion. ``verdict=sample``:
    the sample shown (``sample_id``) gets it, and every other open answer of the group
    (``answer_id``) settles the same way."""
    course = course_or_404(code, instructor=True)
    _question_or_404(question_id)
    back = redirect(url_for("dashboard.review_question", code=code, question_id=question_id))
    group = request.form.get("group", "")
    try:
        ticked = {int(i) for i in request.form.getlist("answer_id")}
        sampled = {int(i) for i in request.form.getlist("sample_id")}
    except ValueError:
        return back
    is_sample = request.form.get("verdict") == "sample"
    read = sampled if is_sample else ticked
    rows = [r for r in review._open_answers(course.id, question_id) if r.id in read]
    share = suggestion(rows)
    if not rows or share is None:
        flash(_("Tick at least one answer that is still open: nothing was graded.") if not rows else
              _("These answers were given different suggestions: decide them with F, Z or P."), "error")
        return back
    if is_sample and len(rows) < sample_size(len(ticked | sampled)):
        flash(_("The sample changed since the page was loaded: nothing was graded."), "error")
        return back
    n = review.decide(course.id, question_id, sorted(read), share, current_user.id, group,
                      how="sample" if is_sample else "group")
    rest = sorted(ticked - sampled) if is_sample else []
    if rest:
        n += review.decide(course.id, question_id, rest, share, current_user.id, group, how="settled")
    labels.forget()
    flash(ngettext("%(num)d answer graded.", "%(num)d answers graded.", n), "ok")
    return back


def annotation_share(p) -> float:
    """The share of its points the reading gave one waiting note."""
    return round(p.provisional / p.review_points, 4) if p.review_points else 0.0


@bp.app_template_global("annotation_suggestion")
def annotation_suggestion(items: list) -> float | None:
    """The share every note of a group was given by the reading (None when they differ)."""
    shares = {annotation_share(p) for p in items}
    if not shares or max(shares) - min(shares) > trust.DEFAULT_RULE.tolerance:
        return None
    return min(shares)


@bp.post("/<code>/review/annotations/confirm")
def review_annotation_confirm(code: str):
    """C on homework 2's queue: the ticked notes get the share the reading suggested for them."""
    course = course_or_404(code, instructor=True)
    back = redirect(url_for("dashboard.review_annotations", code=code))
    wanted = set()
    for raw in request.form.getlist("item"):
        sid, _sep, check_id = raw.partition(":")
        if sid.isdigit():
            wanted.add((int(sid), check_id))
    rows = [p for p in review_annotation.pending(course.id) if (p.submission_id, p.check_id) in wanted]
    share = annotation_suggestion(rows)
    if not rows or share is None:
        flash(_("Tick at least one answer that is still open: nothing was graded.") if not rows else
              _("These answers were given different suggestions: decide them with F, Z or P."), "error")
        return back
    n = review_annotation.decide(course.id, sorted(wanted), share, current_user.id, request.form.get("group", ""))
    labels.forget()
    flash(ngettext("%(num)d answer graded.", "%(num)d answers graded.", n), "ok")
    return back
