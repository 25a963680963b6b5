"""Free-text readers on the dashboard: how often each reader agrees with the teachers' decisions,
per question and per annotated field (the agreement table, with the disagreements one click
away), where trust is earned (``coursework.trust``), and the course's choice to count verdicts
no teacher confirmed yet."""
from __future__ import annotations

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _

from coursework import trust
from coursework.quiz.bank import BankError, load_question
from server.access import course_or_404
from server.dashboard.views import bp
from server.extensions import db
from server.scores import events
from server.quiz import labels, waiting


def _title(item: str) -> str:
    """A question's title (in the page's language is the template's job) or the annotated field."""
    if item.startswith(labels.ANNOTATION_ITEM):
        return item[len(labels.ANNOTATION_ITEM):]
    try:
        return load_question(item).info.get("title", {})
    except BankError:
        return item


@bp.route("/<code>/readers")
def readers(code: str):
    """The agreement table and the course's setting for unconfirmed verdicts."""
    course = course_or_404(code, instructor=True)
    kinds: dict[tuple[str, str], list[str]] = {}
    for k in labels.kind_table():  # trust is per kind of verdict: which kinds count without a teacher
        if k.earned():
            kinds.setdefault((k.reader, k.item), []).append(k.kind)
    rows = [{"a": a, "title": _title(a.item), "earned": a.earned(), "needed": a.needed(),
             "kinds": kinds.get((a.reader, a.item), [])} for a in labels.agreement_table()]
    return render_template("dashboard/readers.html", course=course, rows=rows, rule=trust.DEFAULT_RULE)


@bp.route("/<code>/readers/<reader>/<path:item>")
def reader_disagreements(code: str, reader: str, item: str):
    """The decided answers where ``reader`` suggested something else than the teacher gave."""
    course = course_or_404(code, instructor=True)
    rows = labels.disagreements(item, reader)
    if reader not in (trust.RULE_READER, trust.LLM_READER):
        abort(404)
    return render_template("dashboard/reader_disagreements.html", course=course, reader=reader, item=item,
                           title=_title(item), rows=rows)


@bp.post("/<code>/settings/unconfirmed")
def set_count_unconfirmed(code: str):
    """Count the readers' unconfirmed verdicts (marked so everywhere), or only confirmed ones."""
    course = course_or_404(code, instructor=True)
    count = request.form.get("count") == "1"
    n = waiting.set_count_unconfirmed(course, count)
    db.session.commit()
    events.changed(course.id)
    flash(_("Unconfirmed free-text verdicts now count, marked unconfirmed (%(n)d answers updated).", n=n) if count
          else _("Only confirmed free-text verdicts count now (%(n)d answers updated).", n=n), "ok")
    return redirect(request.form.get("next") or url_for("dashboard.readers", code=code))
