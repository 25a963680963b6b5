"""Student pages: the homework list, an assignment with its spec and upload form, and one
submission's live status that turns into its report.

An upload is checked completely (type, size, encoding, deadline, attempts) before
anything is stored; then the row is committed and only then handed to the queue,
so a Redis outage delays grading but never loses a submission.
"""
from __future__ import annotations

import re

from pathlib import Path

from flask import (Blueprint, abort, current_app, flash, redirect, render_template, request,
                   send_from_directory, url_for)
from flask_babel import gettext as _
from flask_login import current_user
from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired

from coursework.assignments import load
from coursework.exceptions import AssignmentNotFound, SubmissionRejected
from server.access import is_instructor_of, submission_or_404
from server.scores import regrade_requests, release
from server.extensions import db
from server.homework import asking, chart_labels, markdown, readable
from server.homework.charts import charts_for
from server.homework.rules import elapsed_s, homework_for, homework_or_404, upload_refusal
from server.models import FINISHED_STATUSES, Course, Submission, SubmissionStatus
from server.grading.lifecycle import host_lost
from server.grading.queue import grading_mode, queue_place, submit
from server import ui
from server.ui import lang_key, pick
from server.scores.hand_scores import submission_scores as scores
from server.scores.actions import pending_regrades
from server.scores.hand_scores import merged_report, submission_score
from server.scores.gradebook import build_gradebook

bp = Blueprint("homework", __name__)


class UploadForm(FlaskForm):
    file = FileField("file", validators=[FileRequired()])


@bp.route("/")
def root():
    return redirect(url_for("homework.index"))


@bp.route("/homework/")
def index():
    """Every homework of the user's courses with deadline, attempts and best score."""
    return render_template("homework/index.html", homework=homework_for(current_user))


@bp.app_template_filter("evidence_items")
def _evidence_filter(evidence, staff: bool = False):
    return readable.evidence_items(evidence, lang_key(), staff)


@bp.app_template_filter("timing_items")
def _timing_filter(timings, checks=None):
    return readable.timing_items(timings, lang_key(), checks)


@bp.app_template_filter("check_titles")
def _titles_filter(text: str, checks):
    return readable.titles_for_ids(text, checks, lang_key())


# The graders open their summary with the score they gave ("得分 62.86/100。", "Score 62.86/100.").
# The page's headline is the score that counts (with the teacher's hand-given points), so the
# summary's copy of the grader's number goes: one page, one score.
_SCORE_LEAD = re.compile(r"^\s*(?:得分|Score)\s*[-+\d.]+\s*/\s*[\d.]+\s*[。.]\s*")


@bp.app_template_filter("without_score")
def _without_score_filter(text: str) -> str:
    return _SCORE_LEAD.sub("", text or "", count=1)


@bp.app_template_filter("student_log")
def _log_filter(text: str, filename: str = "train.py"):
    return readable.student_log(text, (filename, "train.py"))


@bp.app_template_filter("rank_label")
def _rank_filter(name: str) -> str:
    return readable.log_label(name, lang_key())


bp.add_app_template_filter(readable.clean_message, "clean_message")
bp.add_app_template_filter(readable.syntax_problem, "syntax_problem")


def spec_html(path: Path) -> str:
    """The assignment's README in the current language (README.zh.md for Chinese), rendered safely."""
    names = ["README.zh.md", "README.md"] if lang_key() == "zh" else ["README.md", "README.zh.md"]
    for name in names:
        if (path / name).is_file():
            return markdown.render(markdown.for_language(
                (path / name).read_text(encoding="utf-8", errors="replace"), lang_key()))
    return ""


@bp.route("/homework/<code>/<assignment_id>", methods=["GET", "POST"])
def assignment(code: str, assignment_id: str):
    """The spec, the upload form and the user's submission history for one homework."""
    hw = homework_or_404(current_user, code, assignment_id)
    form = UploadForm()
    if request.method != "POST":
        return assignment_page(hw, form)
    if not form.validate_on_submit():
        error = _("Choose a file to upload.")
    else:
        error = upload_refusal(hw)
    if error is None:
        upload = form.file.data
        filename = Path(upload.filename.replace("\\", "/")).name[:255]
        data = upload.read()
        try:
            hw.assignment.validate_upload(filename, data)
        except SubmissionRejected as exc:
            error = pick(exc.message)
        else:
            sub = store_submission(hw, filename, data)
            return redirect(url_for("homework.submission", submission_id=sub.id))
    return assignment_page(hw, form, error, 400)


@bp.errorhandler(413)
def too_large(exc):
    """A request over the server's whole-request limit (413, raised when the form is read, the CSRF
    check included): the assignment page with the same inline error as any other file that is too
    large. This blueprint's other pages take no upload; they get the site's 413 page."""
    if request.endpoint != "homework.assignment" or not request.view_args:
        return ui.too_large(exc)
    hw = homework_or_404(current_user, request.view_args["code"], request.view_args["assignment_id"])
    limit = min(hw.assignment.max_upload_bytes, current_app.config.get("MAX_CONTENT_LENGTH") or 2 ** 62)
    return assignment_page(hw, UploadForm(formdata=None),
                           _("The file is too large; the limit is %(kib)d KiB.", kib=limit // 1024), 413)


def assignment_page(hw, form, error: str | None = None, status: int = 200):
    """Render the assignment page, with a refused upload's message (nothing stored, no attempt used)."""
    if error:
        flash(error + " " + _("Nothing was stored and no attempt was used."), "error")
    history = db.session.scalars(
        db.select(Submission).where(Submission.user_id == current_user.id, Submission.course_id == hw.course.id,
                                    Submission.assignment_id == hw.assignment.id)
        .order_by(Submission.id.desc())).all()
    return render_template("homework/assignment.html", hw=hw, form=form, spec=spec_html(hw.assignment.path),
                           history=history, refusal=upload_refusal(hw), files=student_files(hw.assignment.path),
                           staff=is_instructor_of(hw.course.id), regrading=regrading_of(history),
                           scores=submission_scores([s.id for s in history])), status


# Only these folders of an assignment are for students; solution/ and samples/ never leave the server.
STUDENT_FOLDERS = ("starter", "release")


def student_files(path: Path) -> list[str]:
    """Downloadable files of an assignment, as ``folder/name`` (starter code, released notebooks)."""
    return [f"{folder}/{p.name}" for folder in STUDENT_FOLDERS if (path / folder).is_dir()
            for p in sorted((path / folder).iterdir()) if p.is_file() and not p.name.startswith(".")]


def submission_scores(ids: list[int]) -> dict:
    """Submission id -> its stored score, what hand-given scores add and the sum that counts
    (``server.scores.hand_scores``: the gradebook's own definition)."""
    return scores(ids)


def regrading_of(subs: list[Submission]) -> dict:
    """Submission id -> its ``Regrade`` row, for those waiting or running again after a regrade
    (their previous result stays on show, marked as being regraded)."""
    return pending_regrades([s.id for s in subs if s.status not in FINISHED_STATUSES])


@bp.route("/homework/<code>/<assignment_id>/files/<folder>/<name>")
def download(code: str, assignment_id: str, folder: str, name: str):
    """A starter file or released notebook of a homework the user is enrolled in."""
    hw = homework_or_404(current_user, code, assignment_id)
    if folder not in STUDENT_FOLDERS or f"{folder}/{name}" not in student_files(hw.assignment.path):
        abort(404)
    return send_from_directory(hw.assignment.path / folder, name, as_attachment=True)


def store_submission(hw, filename: str, data: bytes) -> Submission:
    """Commit the submission first, then enqueue it (the reconciler retries if Redis is down)."""
    mode = grading_mode(hw.assignment.id)
    sub = Submission(user_id=current_user.id, course_id=hw.course.id, assignment_id=hw.assignment.id,
                     status=SubmissionStatus.QUEUED.value, mode=mode, resource=hw.assignment.resource_for(mode),
                     filename=filename, content=data, sha256=Submission.digest(data), size=len(data))
    replaced = submit(sub)  # at most one pending per student and homework: a waiting one is replaced
    if replaced:
        flash(_("Your earlier upload %(ids)s had not been graded yet: this one replaced it. The earlier one "
                "will not be graded and used no attempt.", ids=", ".join(f"#{i}" for i in replaced)), "info")
    return sub


def report_context(sub: Submission) -> dict:
    """What the report fragment needs; the traceback only for the course's instructors.

    ``report`` carries the teacher's hand-given points on its checks (for display); ``sub_score``
    is the submission's score with them, from the one definition the gradebook and the exports
    use (``server.scores.hand_scores``); ``asked``/``askable`` drive the "ask the teacher"
    forms of the annotation fields (the owner's only)."""
    report = merged_report(sub.id, sub.report_json or {})
    staff = is_instructor_of(sub.course_id)
    owner = sub.user_id == current_user.id
    hold = held_back(sub.course_id, f"hw:{sub.assignment_id}", staff)
    if hold is not None:  # graded, not released: nothing of the score reaches the page (server.scores.release)
        return dict(sub=sub, course=db.session.get(Course, sub.course_id), report={"logs": report.get("logs")},
                    checks=[], charts=[], sub_score=None, asked={}, askable=set(), staff=False, traceback=None,
                    elapsed=elapsed_s(sub), released=False, releases_at=hold)
    score = submission_score(sub)
    return dict(released=True, regrade_asked=regrade_requests.for_submission(sub.id),
                sub_waiting=score.waiting, sub_unconfirmed=score.unconfirmed,
                regrade_askable=regrade_requests.askable(sub) if owner else set(), sub=sub, course=db.session.get(Course, sub.course_id), report=report, checks=report.get("checks", []), charts=charts_for(report.get("plots"), chart_labels.for_page()),
                sub_score=score.counted, asked=asking.requests_for(sub.id),
                askable=asking.askable_checks(sub) if owner else set(),
                staff=staff, traceback=(sub.error_detail or report.get("staff_traceback")) if staff else None,
                elapsed=elapsed_s(sub))


def held_back(course_id: int, item: str, staff: bool):
    """None when the viewer may see the item's results; else when they will be released
    (a datetime, or False: when the teacher publishes). Staff always see them."""
    if staff or release.is_released(course_id, item):
        return None
    return release.state(course_id, item)["releases_at"] or False


def counted_for(sub: Submission) -> dict:
    """The score that counts for the submission's homework (the owner's gradebook cell) and its maximum."""
    if held_back(sub.course_id, f"hw:{sub.assignment_id}", is_instructor_of(sub.course_id)) is not None:
        return dict(counted=None, counted_max=None, counted_policy="best")

    book = build_gradebook(db.session.get(Course, sub.course_id), sub.user_id)
    item = book.item(f"hw:{sub.assignment_id}")
    cell = book.rows[0].cells.get(item.key) if item and book.rows else None
    return dict(counted=cell, counted_max=item.max_score if item else sub.max_score,
                counted_policy=item.policy if item else "best")


@bp.route("/submissions/<int:submission_id>")
def submission(submission_id: int):
    """Live status (queue position, elapsed time, rank logs), polled by status.js; the report once done."""
    sub = submission_or_404(submission_id)
    old = regrading_of([sub]).get(sub.id)
    place = queue_place(sub)  # one look-up of the queue for both numbers
    return render_template("homework/submission.html", hw_title=_assignment_title(sub),
                           position=place["queue_position"], eta=place["eta_s"], retry_in=host_lost(sub),
                           finished=sub.status in FINISHED_STATUSES,
                           regrading=old if old is not None and old.old_status == SubmissionStatus.GRADED.value
                           and sub.report_json else None,
                           **report_context(sub), **counted_for(sub))


@bp.route("/submissions/<int:submission_id>/report")
def report(submission_id: int):
    """The report of a finished submission; ``?partial=1`` returns just the fragment for status.js."""
    sub = submission_or_404(submission_id)
    if sub.status not in FINISHED_STATUSES:
        return redirect(url_for("homework.submission", submission_id=sub.id))
    if request.args.get("partial"):
        return render_template("homework/_report.html", **report_context(sub), **counted_for(sub))
    return render_template("homework/submission.html", hw_title=_assignment_title(sub), position=None,
                           finished=True, **report_context(sub), **counted_for(sub))


ASK_ERRORS = {
    "not_owner": lambda: _("Only the student who submitted this work can ask for a review."),
    "already_asked": lambda: _("You have already asked the teacher about this annotation (once per answer)."),
    "not_askable": lambda: _("This check cannot be asked about: only automatically graded annotation fields "
                             "that are not waiting for or decided by a teacher."),
    "empty_comment": lambda: _("Write a comment: say in a few words why you think the annotation is right."),
    "long_comment": lambda: _("The comment is too long: at most 1000 characters."),
}


@bp.post("/submissions/<int:submission_id>/ask")
def ask_teacher(submission_id: int):
    """"I think this is right": the owner asks a teacher to look at one auto-graded annotation, once."""
    sub = submission_or_404(submission_id)
    check_id = request.form.get("check", "")
    try:
        asking.ask(sub, current_user.id, check_id, request.form.get("comment", ""))
        flash(_("A teacher will look at this annotation. Its points stay as graded until then."), "ok")
    except asking.AskError as err:
        flash(ASK_ERRORS[err.code]() + " " + _("Nothing was stored."), "error")
    anchor = "ask-" + check_id if check_id.startswith("field.") and len(check_id) < 200 else None
    return redirect(url_for("homework.submission", submission_id=sub.id, _anchor=anchor))


REGRADE_ERRORS = {
    "not_owner": lambda: _("Only the student who submitted this work can ask for a regrade."),
    "already_asked": lambda: _("You have already asked for a regrade of this check (once per check)."),
    "not_askable": lambda: _("This check cannot be regraded on request now: only checks worth points of a graded, "
                             "released submission, while the course's regrade window is open."),
    "empty_reason": lambda: _("Write a reason: say in a few words why the check should be looked at again."),
    "long_reason": lambda: _("The reason is too long: at most 1000 characters."),
}


@bp.post("/submissions/<int:submission_id>/regrade-request")
def regrade_request(submission_id: int):
    """The owner asks for a regrade of one check, with a reason, once per check."""
    sub = submission_or_404(submission_id)
    check_id = request.form.get("check", "")
    try:
        regrade_requests.ask(sub, current_user.id, check_id, request.form.get("reason", ""))
        flash(_("Regrade requested. The teacher's answer will appear here, beside the check."), "ok")
    except regrade_requests.RequestError as err:
        flash(REGRADE_ERRORS[err.code]() + " " + _("Nothing was stored."), "error")
    return redirect(url_for("homework.submission", submission_id=sub.id))


def _assignment_title(sub: Submission) -> dict:
    try:
        return load(sub.assignment_id).title
    except AssignmentNotFound:
        return {"zh": sub.assignment_id, "en": sub.assignment_id}
