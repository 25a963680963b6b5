"""Quiz pages: the quiz list, one quiz with its attempt history, the attempt page where each
question is its own form with instant feedback, and the results page.

Every question posts on its own (Enter submits), so feedback is immediate per question; with
``Accept: application/json`` the same endpoint answers JSON (used by quiz.js and the benchmark).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Blueprint, abort, current_app, flash, jsonify, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_login import current_user
from markupsafe import Markup

from coursework.quiz.bank import BankError, all_quiz_ids, load_question, load_quiz, sections
from coursework.quiz.result import AnswerStatus
from server.auth.views import checks_session_version, session_auth, session_is_current, session_user_id
from server.scores import release
from server.extensions import db
from server.models import Role
from server.quiz import attempts as rules
from server.quiz import pages, reveal, review, store
from server.quiz.models import QuizAttempt
from server.ui import lang_key
from server.scores.gradebook import build_gradebook

bp = Blueprint("quiz", __name__, url_prefix="/quiz", cli_group="quiz")


def _messages() -> dict[str, str]:
    return {"not_open": _("This quiz is not open yet."), "closed": _("This quiz is closed."),
            "no_attempts_left": _("You have used all attempts for this quiz."),
            "attempt_closed": _("This attempt is finished."), "already_answered": _("You already answered this question."),
            "unknown_question": _("No such question in this attempt.")}


def _quiz_or_404(quiz_id: str):
    try:
        return load_quiz(quiz_id)
    except BankError:
        abort(404)


def _attempt_row_or_404(attempt_id: int, for_page: bool = False) -> Any:
    """The signed-in student's attempt as the hot paths read it (``store.attempt_row``)."""
    att = store.attempt_row(attempt_id, int(session_user_id()), session.get("_sv"), for_page)
    if att is None:
        if not session_is_current():  # ended by a logout or a new password: sign in again
            abort(current_app.login_manager.unauthorized())
        abort(404)  # 404, not 403: other students' attempt ids reveal nothing
    return att


def _own_attempt_or_404(attempt_id: int) -> QuizAttempt:
    attempt = db.session.get(QuizAttempt, attempt_id)
    if attempt is None or attempt.user_id != current_user.id:
        abort(404)
    return attempt


@dataclass(frozen=True, slots=True)
class QuizScore:
    """What the quiz pages show for one quiz: the student's gradebook cell (the score that counts,
    an override and its reason), what it is out of, and whether the course counts the quiz."""

    cell: Any  # server.scores.gradebook.Cell
    max_score: float | None
    counted: bool


def _quiz_scores(user_id: int) -> dict[str, QuizScore]:
    """quiz id -> the student's ``QuizScore`` from their own gradebook row in the courses they study
    in (the first that has one, where attempts start): the one source of the quiz pages' score,
    the number the gradebook and its exports show. No cell (no attempt in a course, no override):
    nothing counts, so nothing is shown."""
    out: dict[str, QuizScore] = {}
    for m in current_user.memberships:
        if m.role != Role.STUDENT.value:
            continue
        book = build_gradebook(m.course, user_id)
        for row in book.rows[:1]:
            for item in book.items:
                cell = row.cells.get(item.key)
                if item.kind == "quiz" and cell is not None and cell.score is not None \
                        and release.is_released(m.course_id, item.key):
                    out.setdefault(item.ref, QuizScore(cell, item.max_score or cell.max_score, item.counted))
    return out


def _held(quiz_id: str) -> bool:
    """True while a course the student studies in holds this quiz's results back (``server.scores.release``)."""
    return any(m.role == Role.STUDENT.value and not release.is_released(m.course_id, f"quiz:{quiz_id}")
               for m in current_user.memberships)


@bp.route("/")
def index():
    """Every quiz with its mode, attempts used and its score (the gradebook cell)."""
    scores = _quiz_scores(current_user.id)
    rows = [{"quiz": quiz, "used": len(rules.attempts_of(current_user.id, quiz.id)), "score": scores.get(quiz.id),
             "held": _held(quiz.id)} for quiz in map(load_quiz, all_quiz_ids())]
    return render_template("quiz/index.html", rows=rows)


@bp.route("/<quiz_id>/")
def overview(quiz_id: str):
    """Description, rules, the score (the gradebook cell) and attempt history of one quiz."""
    quiz = _quiz_or_404(quiz_id)
    history = rules.attempts_of(current_user.id, quiz_id)
    refusal = rules.start_refusal(quiz, current_user.id)
    open_attempt = next((a for a in history if a.is_open), None)
    return render_template("quiz/overview.html", quiz=quiz, history=list(reversed(history)),
                           refusal=_messages().get(refusal or "", ""), open_attempt=open_attempt,
                           courses=_course_choices(),
                           score=_quiz_scores(current_user.id).get(quiz_id), held=_held(quiz_id),
                           generated=any(not reveal.fixed_text(q) for q in quiz.question_ids))


def _course_choices() -> list[Any]:
    """The courses the signed-in user can take a quiz in: where they study (any course they belong
    to if they study in none), by course code."""
    studying = [m.course for m in current_user.memberships if m.role == Role.STUDENT.value]
    return sorted(studying or [m.course for m in current_user.memberships], key=lambda c: c.code)


def _attempt_course(choices: list[Any]) -> Any:
    """The course an attempt is filed under: the one the form names (one of the user's), or the
    only one; None when the user belongs to several and named none of them (they must choose:
    filing it under the first membership put it in the wrong gradebook and review queue)."""
    named = request.form.get("course", "")
    chosen = next((c for c in choices if c.code == named), None)
    if chosen is None and len(choices) == 1 and not named:
        chosen = choices[0]
    return chosen


@bp.post("/<quiz_id>/start")
def start(quiz_id: str):
    """Start (or resume) an attempt and go to its first question."""
    quiz = _quiz_or_404(quiz_id)
    choices = _course_choices()
    open_attempt = next((a for a in rules.attempts_of(current_user.id, quiz_id) if a.is_open), None)
    course = _attempt_course(choices)
    if course is None and choices and open_attempt is None:
        flash(_("Choose the course you are taking this quiz for."), "error")
        return redirect(url_for("quiz.overview", quiz_id=quiz_id))
    course_id = course.id if course is not None else None
    try:
        attempt = rules.start_attempt(quiz, current_user.id, course_id)
    except rules.QuizRuleError as err:
        flash(_messages()[err.code], "error")
        return redirect(url_for("quiz.overview", quiz_id=quiz_id))
    return redirect(url_for("quiz.attempt", attempt_id=attempt.id))


@bp.route("/attempt/<int:attempt_id>")
@session_auth
@checks_session_version
def attempt(attempt_id: int):
    """All questions of the attempt; answered ones show their feedback and explanation."""
    att = _attempt_row_or_404(attempt_id, for_page=True)
    return pages.attempt_page(att, _quiz_or_404(att.quiz_id), lang_key())


def _raw_answer(qtype: str, options: list[str]) -> str:
    """The submitted form as the grader's answer string."""
    if qtype == "multiple":
        return ",".join(request.form.getlist("choice"))
    if qtype == "single":
        return request.form.get("choice", "")
    if qtype == "ordering":
        try:
            ranked = sorted(options, key=lambda i: int(request.form.get(f"pos_{i}", "")))
        except ValueError:
            return ""
        positions = [request.form.get(f"pos_{i}") for i in options]
        return ",".join(ranked) if len(set(positions)) == len(positions) else ",".join(ranked + ranked[:1])
    return request.form.get("answer", "")


def _wants_json() -> bool:
    return request.accept_mimetypes.best == "application/json" or request.args.get("format") == "json"


@bp.post("/attempt/<int:attempt_id>/answer/<int:pos>")
@session_auth
@checks_session_version
def answer(attempt_id: int, pos: int):
    """Grade one question now; format errors come back without using the question."""
    att = _attempt_row_or_404(attempt_id)
    if not 0 <= pos < len(att.question_ids):
        abort(404)
    qid = att.question_ids[pos]
    variant = rules.variant_for(att, qid)
    raw = _raw_answer(variant.question.type, variant.option_order)
    lang = lang_key()
    as_json = _wants_json()  # (the Accept header's best match, worked out once, not at every branch)
    try:
        outcome = rules.answer_question(att, qid, raw, lang, variant)
    except rules.QuizRuleError as err:
        if as_json:
            return jsonify({"error": err.code, "message": _messages().get(err.code, err.code)}), 409
        flash(_messages().get(err.code, err.code), "error")
        return redirect(url_for("quiz.attempt", attempt_id=att.id, _anchor=f"q{pos}"))
    result = outcome.result
    if as_json and outcome.answer is not None and (outcome.answer.get("details_json") or {}).get("unjudged"):
        # practice records it without a verdict while the graded quiz holds the question (server.quiz.reveal)
        return jsonify({"status": "recorded", "card_html": pages.answered_card(
            att, pos, lang, outcome.answer["id"], lambda: outcome.answer, ""), "review_html": ""}), 200
    if as_json and outcome.answer is not None and pages.held_back(att):
        # results held back (server.scores.release): the answer is stored, nothing of its grading goes out
        return jsonify({"status": "recorded", "card_html": pages.answered_card(
            att, pos, lang, outcome.answer["id"], lambda: outcome.answer, outcome.answer.get("review_state") or "",
            hidden=True), "review_html": ""}), 200
    if as_json:
        body = {"status": result.status.value, "score": result.score, "max_score": result.max_score,
                "correct": result.correct, "feedback": result.feedback_text(lang), "attempt_score": outcome.attempt_score}
        if outcome.answer is not None:
            if reveal.reference_shown(att, qid):  # a graded quiz's answers stay hidden until it says so
                body["explanation"] = variant.question.text("explanation", lang)
                body["reference"] = variant.reference_text(lang)
            elif reveal.fixed_text(qid):
                body["feedback"] = []  # "Missed: ..." names the right answer of a fixed question
            # the answered card as the page shows it: quiz.js swaps it in without a reload, and
            # the next full page load finds it rendered already
            body["card_html"] = pages.answered_card(att, pos, lang, outcome.answer["id"], lambda: outcome.answer,
                                                    outcome.answer.get("review_state") or "")
            body["needs_review"] = result.needs_review
            body["review_html"] = pages.review_form(
                att, pos, outcome.answer.get("review_state") or ("full" if outcome.answer.get("correct") else ""), lang)
        return jsonify(body), (200 if outcome.answer is not None else 422)
    if result.status == AnswerStatus.FORMAT_ERROR:
        error = " ".join(result.feedback_text(lang))
        page_att = _attempt_row_or_404(attempt_id, for_page=True)
        return pages.attempt_page(page_att, _quiz_or_404(att.quiz_id), lang, override=(pos, error, raw)), 422
    return redirect(url_for("quiz.attempt", attempt_id=att.id, _anchor=f"q{pos}"))


@bp.post("/attempt/<int:attempt_id>/review/<int:pos>")
def request_review(attempt_id: int, pos: int):
    """"I think this is right": ask a teacher to look at an auto-graded free-text answer, once."""
    att = _own_attempt_or_404(attempt_id)
    if not 0 <= pos < len(att.question_ids):
        abort(404)
    answer = att.answer_for(att.question_ids[pos])
    if answer is None:
        abort(404)
    try:
        review.request_review(answer, request.form.get("comment", ""),
                              current_app.config["QUIZ_REVIEW_REQUESTS_PER_ATTEMPT"])
        flash(_("A teacher will look at this answer."), "ok")
    except review.ReviewError as err:
        limit = current_app.config["QUIZ_REVIEW_REQUESTS_PER_ATTEMPT"]
        flash({"already_requested": _("This answer has already been sent for review."),
               "practice": _("Practice answers count nothing, so they are not sent to a teacher. "
                             "Compare yours with the reference answer shown."),
               "too_many": _("You can ask a teacher to review at most %(n)d answers per attempt.", n=limit),
               "empty_comment": _("Say in a few words why you think the answer is right."),
               "not_text": _("Only written answers can be reviewed."),
               "full_marks": _("This answer already has full marks.")}.get(err.code, err.code), "error")
    return redirect(url_for("quiz.attempt", attempt_id=att.id, _anchor=f"q{pos}"))


@bp.post("/attempt/<int:attempt_id>/finish")
def finish(attempt_id: int):
    """Hand the attempt in; unanswered questions score zero."""
    att = _own_attempt_or_404(attempt_id)
    rules.finish_attempt(att)
    return redirect(url_for("quiz.results", attempt_id=att.id))


@bp.route("/attempt/<int:attempt_id>/results")
def results(attempt_id: int):
    """Score, per-question outcome and the chapter sections worth rereading."""
    att = _own_attempt_or_404(attempt_id)
    if att.is_open:
        return redirect(url_for("quiz.attempt", attempt_id=att.id))
    quiz = _quiz_or_404(att.quiz_id)
    lang = lang_key()
    rows = [{"pos": pos, "title": load_question(qid).text("title", lang), "answer": att.answer_for(qid),
             "points": load_question(qid).points, "section": load_question(qid).section}
            for pos, qid in enumerate(att.question_ids)]
    titles = sections()
    if not release.is_released(att.course_id, f"quiz:{att.quiz_id}"):  # held back: server.scores.release
        return render_template("quiz/results.html", attempt=att, quiz=quiz, rows=rows, reread=[], held=True)
    reread = [(s, titles.get(s, {}).get(lang, s)) for s in rules.sections_to_reread(att)]
    return render_template("quiz/results.html", attempt=att, quiz=quiz, rows=rows, reread=reread, held=False,
                           waiting=rules.waiting_summary(att))


@bp.app_template_filter("answer_text")
def answer_text(ans: Any) -> Markup:
    """A stored answer as a person reads it: a choice answer as its options' texts, not their ids;
    anything else as the student typed it (marked so, it is in the student's language)."""
    typed = Markup('<span translate="no">{}</span>').format(ans.raw_answer)
    try:
        public = rules.cached_variant(ans.question_id, ans.seed).public(lang_key())
    except (BankError, KeyError, ValueError):
        return typed  # the question left the bank: the answer as stored is all there is
    chosen = pages.chosen_texts(public, ans)
    return typed if chosen is None else Markup.escape(("；" if lang_key() == "zh" else "; ").join(chosen))
