"""Dashboard pages: the course list, the gradebook (sortable, filterable, paged, with totals),
one student's page (every quiz attempt and submission with its report), and the exports."""
from __future__ import annotations

import json
import re
from datetime import datetime

from flask import Blueprint, Response, abort, redirect, render_template, request, stream_with_context, url_for
from flask_babel import gettext as _
from flask_login import current_user

from coursework.assignments import load as load_assignment
from coursework.exceptions import AssignmentNotFound
from coursework.quiz.bank import BankError, all_quiz_ids, load_question, load_quiz
from server.access import course_or_404, course_submission_or_404, student_or_404
from server.dashboard import exports
from server.scores import actions
from server.scores.gradebook import build_gradebook, gc_paused, sort_and_filter
from server.scores.models import AuditEntry, Extension
from server.extensions import db
from server.scores.release import hidden_items
from server.homework.points import natural_key
from server.homework.views import report_context
from server.models import Role, Submission, User
from server.quiz.models import QuizAttempt
from server.ui import lang_key, pick

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")

PER_PAGE = 100


@bp.before_request
def instructors_only():
    """Nobody but an instructor gets past this (anonymous users are sent to sign in first)."""
    if not current_user.is_authenticated:
        return redirect(url_for("auth.login", next=request.full_path))
    if not current_user.is_instructor_anywhere:
        abort(404)


@bp.app_template_global("dash_quizzes")
def dash_quizzes() -> list[tuple[str, dict]]:
    """Every quiz (id, title), for the Teaching navigation (``dashboard/_nav.html``, on pages of
    several blueprints: the roster and all-submissions pages are the instructor's)."""
    quizzes = []
    for qid in all_quiz_ids():
        try:
            quizzes.append((qid, load_quiz(qid).title))
        except BankError:
            quizzes.append((qid, {"zh": qid, "en": qid}))
    return quizzes


@bp.app_template_filter("job_label")
def job_label(job_id: str) -> str:
    """"submission #12" for the queue's ``sub-12-g1`` job ids."""
    m = re.fullmatch(r"sub-(\d+)-g\d+", job_id or "")
    return _("submission #%(id)s", id=m.group(1)) if m else (job_id or "")[:40]


@bp.app_template_filter("hw_title")
def hw_title(assignment_id: str) -> str:
    """A homework's title in the page's language (its folder name if the folder is gone)."""
    try:
        return pick(load_assignment(assignment_id).title)
    except AssignmentNotFound:
        return assignment_id


@bp.app_template_filter("quiz_title")
def quiz_title(quiz_id: str) -> str:
    """A quiz's title in the page's language (its id if the quiz is gone)."""
    try:
        return pick(load_quiz(quiz_id).title)
    except BankError:
        return quiz_id


@bp.app_template_filter("question_title")
def question_title(question_id: str) -> str:
    """A quiz question's title in the page's language (its id if the question is gone)."""
    try:
        return pick(load_question(question_id).info.get("title") or question_id)
    except BankError:
        return question_id


@bp.app_template_filter("audit_target")
def audit_target(target: str) -> str:
    """What an audit entry changed, in words: ``hw:ddp_speedup`` -> "Homework 1: ...",
    ``sub:12/regrade.speedup`` -> "submission #12 · Speed-up", ``quiz:q/attempt:3/ch7_3/x`` -> the
    quiz, the attempt and the question's title (the raw target stays in the cell's ``data-target``)."""
    target = str(target or "")[:300]
    kind, _sep, rest = target.partition(":")
    if kind == "hw":
        return hw_title(rest)
    if kind == "quiz":
        quiz_id, _sep, tail = rest.partition("/attempt:")
        attempt, _sep, question = tail.partition("/")
        parts = [quiz_title(quiz_id)]
        if attempt.isdigit():
            parts.append(_("Attempt %(n)d", n=int(attempt)))
        if question:
            parts.append(question_title(question))
        return " · ".join(parts)
    if kind == "sub":
        sid, _sep, cell = rest.partition("/")
        if not sid.isdigit():
            return target
        parts = [_("submission #%(id)s", id=sid)]
        if cell == "integrity":
            parts.append(_("Integrity review"))
        elif cell:
            parts.append(_check_title(int(sid), cell.removeprefix("regrade.")))
        return " · ".join(parts)
    return target


def _check_title(submission_id: int, check_id: str) -> str:
    """A check's (or manual cell's) title for the submission's homework, else the id as stored."""
    sub = db.session.get(Submission, submission_id)
    try:
        spec = load_assignment(sub.assignment_id).raw.get("checks", {}).get(check_id) if sub else None
    except AssignmentNotFound:
        spec = None
    title = spec.get("title") if isinstance(spec, dict) else None
    return pick(title) if isinstance(title, dict) else check_id


@bp.app_template_filter("hw_in_order")
def hw_in_order(settings: list) -> list:
    """A course's homework by deadline, then title ("Homework 1, 2, 3"), as the gradebook orders them."""
    return sorted(settings, key=lambda ca: (ca.deadline or datetime.max, natural_key(hw_title(ca.assignment_id)),
                                            ca.assignment_id))


@bp.app_template_filter("hw_short_title")
def hw_short_title(assignment_id: str) -> str:
    """"Homework 1" from "Homework 1: DDP speedup" (the part before the colon), else the whole title."""
    title = hw_title(assignment_id)
    return re.split(r"[:：]", title, maxsplit=1)[0].strip() or title


@bp.route("/")
def index():
    """The courses this user teaches; with one course, straight to its gradebook."""
    courses = [m.course for m in current_user.memberships if m.role == Role.INSTRUCTOR.value]
    if len(courses) == 1:
        return redirect(url_for("dashboard.gradebook", code=courses[0].code))
    return render_template("dashboard/index.html", courses=courses)


def _flag(name: str) -> bool:
    return request.args.get(name) in ("1", "on", "true")


@bp.route("/<code>/")
def gradebook(code: str):
    """Students x items with totals; ?q= filters, ?sort=<key>&desc=1 sorts, ?behind=1 keeps those behind."""
    course = course_or_404(code, instructor=True)
    with gc_paused():  # the book dies when _gradebook_page returns: the collector never scans its cells
        return _gradebook_page(course)


def _gradebook_page(course) -> str:
    book = build_gradebook(course)
    sort, desc, q = request.args.get("sort", "username"), _flag("desc"), request.args.get("q", "").strip()
    rows = sort_and_filter(book, q=q, sort=sort, desc=desc, behind=_flag("behind"))
    pages = max(1, -(-len(rows) // PER_PAGE))
    page = min(max(1, request.args.get("page", 1, type=int)), pages)
    means = book.item_means()
    html = render_template("dashboard/gradebook.html", course=course, book=book, rows=rows[(page - 1) * PER_PAGE:
                           page * PER_PAGE], matched=len(rows), page=page, pages=pages, sort=sort, desc=desc, q=q,
                           behind=_flag("behind"), means=means, hidden=hidden_items(course.id))
    book.rows.clear()  # Jinja's render context is a reference cycle (its macros) that would keep every row alive
    return html


@bp.route("/<code>/students/<username>")
def student(code: str, username: str):
    """One student: their gradebook row with override forms, quiz attempts, submissions with reports."""
    course = course_or_404(code, instructor=True)
    user = student_or_404(course.id, username)
    book = build_gradebook(course)
    row = next(r for r in book.rows if r.user_id == user.id)
    attempts = db.session.scalars(db.select(QuizAttempt).where(
        QuizAttempt.user_id == user.id, QuizAttempt.course_id == course.id)
        .order_by(QuizAttempt.quiz_id, QuizAttempt.attempt_no)).all()
    subs = db.session.scalars(db.select(Submission).where(
        Submission.user_id == user.id, Submission.course_id == course.id)
        .order_by(Submission.assignment_id, Submission.id.desc())
        .options(db.undefer(Submission.report_json), db.undefer(Submission.error_detail))).all()
    reports = {s.id: report_context(s) for s in subs}
    manual = {s.id: actions.manual_cells(s.report_json) for s in subs}
    extensions = {ca_id: ext for ca_id, ext in db.session.execute(
        db.select(Extension.course_assignment_id, Extension).where(Extension.user_id == user.id))}
    actor = db.aliased(User)
    audit = db.session.execute(
        db.select(AuditEntry, User.username, actor.username).join(User, User.id == AuditEntry.user_id)
        .join(actor, actor.id == AuditEntry.actor_id)
        .where(AuditEntry.course_id == course.id, AuditEntry.user_id == user.id)
        .order_by(AuditEntry.at.desc(), AuditEntry.id.desc())).all()
    return render_template("dashboard/student.html", course=course, user=user, book=book, row=row,
                           attempts=attempts, subs=subs, reports=reports, manual=manual,
                           extensions=extensions, audit=audit)


def _download(body, filename: str, mimetype: str) -> Response:
    return Response(body, mimetype=mimetype, headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@bp.route("/<code>/export/canvas.csv")
def export_canvas(code: str):
    """The gradebook as a Canvas gradebook import CSV."""
    course = course_or_404(code, instructor=True)
    return _download(exports.canvas_csv(build_gradebook(course), lang_key()), f"{course.code}-canvas.csv",
                     "text/csv")  # werkzeug adds "; charset=utf-8" to a text type


@bp.route("/<code>/export/moodle.csv")
def export_moodle(code: str):
    """The gradebook as a Moodle "Import grades from CSV" file."""
    course = course_or_404(code, instructor=True)
    return _download(exports.moodle_csv(build_gradebook(course), lang_key()), f"{course.code}-moodle.csv",
                     "text/csv")  # werkzeug adds "; charset=utf-8" to a text type


@bp.route("/<code>/export/reports.jsonl")
def export_reports(code: str):
    """Every finished submission with its report, one JSON object per line (streamed)."""
    course = course_or_404(code, instructor=True)
    body = stream_with_context(exports.reports_jsonl(course.id, request.args.get("assignment") or None))
    return _download(body, f"{course.code}-reports.jsonl", "application/x-ndjson")


@bp.route("/<code>/submissions/<int:submission_id>/gradescope.json")
def export_gradescope(code: str, submission_id: int):
    """One submission's report in Gradescope's results.json format."""
    course = course_or_404(code, instructor=True)
    sub = course_submission_or_404(course.id, submission_id)
    body = json.dumps(exports.gradescope_results(sub, lang_key()), ensure_ascii=False, indent=1)
    return _download(body, f"results-{sub.id}.json", "application/json")
