"""Per-item dashboard pages: quiz statistics per question, homework statistics per check id with
the class charts, and regrading (one submission or a whole homework) with its result page."""
from __future__ import annotations

import redis
from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user
from rq import Worker

from coursework.quiz.bank import BankError, load_quiz
from coursework.text import pick
from server.access import course_or_404, course_submission_or_404, settings_or_404
from server.dashboard import stats
from server.scores import actions
from server.scores.gradebook import build_gradebook
from server.scores.models import Extension
from server.dashboard.views import bp
from server.extensions import db
from server.homework.charts import bar_chart
from server.models import FINISHED_STATUSES, Submission, User
from server.grading.queue import redis_conn
from server.ui import lang_key

SPEEDUP_EDGES = [0.0, 0.5, 1.0, 1.25, 1.5, 1.75, 2.0]


def _bin_starts(hist: dict[str, float]) -> dict[str, float]:
    """Histogram bars labelled by where each bin starts ("0–10%" -> "0"), so ten labels fit on a phone."""
    return {k.split("–")[0].rstrip("%") if "–" in k else k: v for k, v in hist.items()}


@bp.route("/<code>/quiz/<quiz_id>")
def quiz_stats(code: str, quiz_id: str):
    """Each question: answers, mean score, facility, discrimination, common wrong answers or missing concepts."""
    course = course_or_404(code, instructor=True)
    try:
        quiz = load_quiz(quiz_id)
    except BankError:
        abort(404)
    questions = stats.quiz_question_stats(course.id, quiz.id, quiz.question_ids, lang_key())
    book = build_gradebook(course)
    item = book.item(f"quiz:{quiz.id}")
    fractions = [r.cells[item.key].score / item.max_score for r in book.rows
                 if item and item.max_score and item.key in r.cells and r.cells[item.key].score is not None]
    charts = {}
    if fractions:
        charts["hist"] = bar_chart(_("Score distribution"), _bin_starts(stats.histogram(fractions)),
                                   x_title=_("score, percent of the maximum (bins from)"), y_title=_("students"))
    if any(q.answers for q in questions):
        charts["facility"] = bar_chart(_("Facility per question"),
                                       {str(i + 1): q.facility for i, q in enumerate(questions)},
                                       x_title=_("question"), y_title=_("facility (0–1)"))
    return render_template("dashboard/quiz_stats.html", course=course, quiz=quiz, questions=questions,
                           charts=charts, takers=len(fractions))


@bp.route("/<code>/homework/<assignment_id>")
def homework_stats(code: str, assignment_id: str):
    """Per check id: how many students' latest submissions fail it, with links; charts; settings."""
    course = course_or_404(code, instructor=True)
    ca = settings_or_404(course.id, assignment_id)
    hs = stats.homework_stats(course.id, assignment_id)
    charts = {}
    if hs.scores:
        charts["hist"] = bar_chart(_("Score distribution"), _bin_starts(stats.histogram(hs.scores)),
                                   x_title=_("score, percent of the maximum (bins from)"), y_title=_("students"))
    failing = {(pick(c.title, lang_key()) or c.check_id): float(len(c.failing)) for c in hs.checks if c.failing}
    if failing:
        same = frozenset(c.title.get("en") for c in hs.checks if c.title.get("zh") == c.title.get("en"))
        charts["failures"] = bar_chart(_("Students failing each check"), failing, x_title=_("check"),
                                       y_title=_("students"), names=same)
    if hs.speedups:
        charts["speedup"] = bar_chart(_("Speed-up across the class"),
                                      _bin_starts(stats.value_histogram(hs.speedups, SPEEDUP_EDGES)),
                                      x_title=_("speed-up (×), bins from"), y_title=_("students"))
    if hs.rank_peaks:
        charts["memory"] = bar_chart(_("Mean peak memory per rank (GiB)"), {
            f"rank {rank.removeprefix('rank')}": sum(v) / len(v) / 2 ** 30 for rank, v in sorted(hs.rank_peaks.items())},
            x_title=_("rank"), y_title=_("peak memory (GiB)"))
    extensions = db.session.execute(db.select(Extension, User.username).join(User, User.id == Extension.user_id)
                                    .where(Extension.course_assignment_id == ca.id)
                                    .order_by(User.username)).all()
    return render_template("dashboard/homework_stats.html", course=course, ca=ca, hs=hs, charts=charts,
                           extensions=extensions, batches=actions.recent_batches(course.id))


def _live_graders() -> int:
    """Workers registered with Redis now (0 if it cannot be asked): the estimate divides by them."""
    try:
        return Worker.count(connection=redis_conn())
    except (redis.exceptions.RedisError, RuntimeError):
        return 0


@bp.post("/<code>/homework/<assignment_id>/regrade")
def regrade_all(code: str, assignment_id: str):
    """Regrade every finished submission of a homework (after a grader change).

    Nothing happens until the instructor confirms the number shown to them: the first POST
    answers with the count and a time estimate; the confirming POST carries that count back,
    and if more submissions have finished since, it asks again.
    """
    course = course_or_404(code, instructor=True)
    ca = settings_or_404(course.id, assignment_id)
    subs = db.session.scalars(db.select(Submission).where(
        Submission.course_id == course.id, Submission.assignment_id == assignment_id,
        Submission.status.in_(FINISHED_STATUSES))).all()
    if not subs:
        flash(_("Nothing to regrade: no finished submissions."), "info")
        return redirect(url_for("dashboard.homework_stats", code=code, assignment_id=assignment_id))
    if request.form.get("confirm", type=int) != len(subs):
        return _confirm_regrade(course, ca, list(subs))
    return _regraded(code, assignment_id, actions.regrade(list(subs), current_user.id, _clears()))


def _clears() -> bool:
    return request.form.get("clear_decisions") == "1"


def _confirm_regrade(course, ca, subs: list[Submission]):
    """The page that asks before a regrade: how many, how long, and whether the submissions that
    carry the teacher's annotation decisions are regraded too (clearing them) or left as they are."""
    graders = _live_graders()
    mean = actions.mean_grading_s(course.id, ca.assignment_id)
    return render_template("dashboard/regrade_confirm.html", course=course, ca=ca, count=len(subs),
                           students=len({s.user_id for s in subs}), graders=graders, mean_s=mean,
                           estimate_s=actions.estimate_seconds(len(subs), mean, graders),
                           decided=len(actions.decided_submissions([s.id for s in subs])))


def _regraded(code: str, assignment_id: str, batch: str | None):
    if batch is None:
        flash(_("Nothing was regraded: every submission chosen carries your annotation decisions, which you kept."),
              "info")
        return redirect(url_for("dashboard.homework_stats", code=code, assignment_id=assignment_id))
    return redirect(url_for("dashboard.regrade_batch", code=code, batch=batch))


@bp.post("/<code>/submissions/<int:submission_id>/regrade")
def regrade_one(code: str, submission_id: int):
    """Regrade one submission through the normal queue."""
    course = course_or_404(code, instructor=True)
    sub = course_submission_or_404(course.id, submission_id)
    if sub.status not in FINISHED_STATUSES:
        flash(_("This submission is still waiting or running; it will be graded anyway."), "info")
        return redirect(url_for("dashboard.student", code=code, username=sub.user.username))
    if actions.decided_submissions([sub.id]) and request.form.get("confirm") != "1":
        return _confirm_regrade(course, settings_or_404(course.id, sub.assignment_id), [sub])  # ask first
    return _regraded(code, sub.assignment_id, actions.regrade([sub], current_user.id, _clears()))


@bp.route("/<code>/regrades/<batch>")
def regrade_batch(code: str, batch: str):
    """Old and new score of each regraded submission; changed ones first. Reload while it runs."""
    course = course_or_404(code, instructor=True)
    results = actions.regrade_results(course.id, batch)
    if not results:
        abort(404)
    done = sum(r.done for r in results)
    template = "dashboard/_regrade_live.html" if request.args.get("partial") else "dashboard/regrade.html"
    return render_template(template, course=course, batch=batch, results=results, done=done,
                           changed=sum(r.changed for r in results))
