"""Integrity review: submissions whose grading raised integrity events (tamper evidence, records
that do not fit the schema or the measured run, forbidden names in the upload) wait here.

While ``review_status`` is ``pending`` the submission counts 0 points (it is graded and counts as
an attempt). The instructor sees the events and decides, with a required reason: *accept* (the
grade stands as computed, without the integrity penalty) or *reject* (0 points). Each decision
changes the submission's score and appends an ``AuditEntry``; a decision can be revised, which
is audited again. Students never see the events, only that a review is pending or its outcome.

A decision is about the grading the instructor saw: the form carries its run (``grading_runs``,
which every new run raises), and the write is a compare-and-set on the status (graded), that
run and the score the decision replaces. A submission regraded meanwhile (queued again, or
graded by a newer run) or decided by someone else in between is left as it is, nothing is
audited, and the instructor is asked to look again.
"""
from __future__ import annotations

import re

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user
from sqlalchemy.orm import undefer

from server.access import course_or_404, course_submission_or_404
from server.scores.actions import ActionError, _audit
from server.dashboard.views import bp
from server.extensions import db
from server.scores import events
from server.grading.lifecycle import compare_and_set
from server.models import Submission, SubmissionStatus, User, utcnow

DECISIONS = {"accept": "accepted", "reject": "rejected"}
GRADED = SubmissionStatus.GRADED.value
MAX_REASON = 2000
PER_PAGE = 200


SCRIPT_NAMES = ("train.py", "train_fsdp.py")  # what the graders stage an uploaded script as (the runs' file name)
_WHERE = re.compile(r"([\w.-]+\.py):(\d{1,6})")
MAX_LINE = 200


def review_queue(course_id: int) -> list[Submission]:
    """Submissions of the course under integrity review: pending first, then decided, newest first."""
    subs = db.session.scalars(
        db.select(Submission).options(undefer(Submission.report_json), undefer(Submission.content))
        .where(Submission.course_id == course_id, Submission.review_status.is_not(None))
        .order_by((Submission.review_status != "pending"), Submission.finished_at.desc())
        .limit(PER_PAGE)).all()
    return list(subs)


def events_of(sub: Submission) -> list[dict]:
    """The integrity events stored in the report (staff only)."""
    integrity = (sub.report_json or {}).get("integrity") or {}
    events = integrity.get("events") if isinstance(integrity, dict) else None
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def source_line(sub: Submission, event: dict) -> dict | None:
    """``{"file", "line", "code"}``: the line of the student's upload an event names (the audit hook's
    ``at train.py:12``, the static scan's ``train.py:12:``), or None when it names none of theirs.

    Only a single uploaded ``.py`` file is looked up, under its own name or the name the graders ran it
    as; the code is shown as text (escaped by the template), cut to one screen line.
    """
    m = _WHERE.search(str(event.get("detail", "")))
    if m is None or not (sub.filename or "").endswith(".py") or not sub.content:
        return None
    name, number = m.group(1), int(m.group(2))
    if name != sub.filename and name not in SCRIPT_NAMES:
        return None  # e.g. the homework's own model.py
    lines = sub.content.decode("utf-8", errors="replace").splitlines()
    if not 1 <= number <= len(lines):
        return None
    return {"file": name, "line": number, "code": lines[number - 1].strip()[:MAX_LINE]}


def decide(sub: Submission, decision: str, reason: str, actor_id: int, seen_run: int | None) -> None:
    """Accept (score = computed grade) or reject (0) the grading ``seen_run`` of a submission
    under review; audited. ActionError("stale") when the row is no longer that grading, or its
    score changed since ``sub`` was read: then nothing is written."""
    if decision not in DECISIONS or sub.review_status is None:
        raise ActionError("bad_decision")
    reason = (reason or "").strip()[:MAX_REASON]
    if not reason:
        raise ActionError("reason_required")
    if seen_run is None or sub.status != GRADED or sub.grading_runs != seen_run:
        raise ActionError("stale")
    old = sub.score
    new = float(sub.computed_score or 0.0) if decision == "accept" else 0.0
    won = compare_and_set(
        sub.id, [Submission.status == GRADED, Submission.grading_runs == seen_run,
                 Submission.review_status.is_not(None),
                 Submission.score.is_(None) if old is None else Submission.score == old],
        score=new, review_status=DECISIONS[decision], review_reason=reason, reviewed_by=actor_id,
        reviewed_at=utcnow())
    if not won:
        db.session.rollback()
        raise ActionError("stale")
    _audit(sub.course_id, sub.user_id, f"sub:{sub.id}/integrity", old, new, f"{decision}: {reason}", actor_id)
    db.session.commit()
    events.changed(sub.course_id, sub.user_id, f"hw:{sub.assignment_id}")


def _seen_run(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _refusal(code: str) -> str:
    if code == "reason_required":
        return _("A reason is required for every manual change.")
    if code == "stale":
        return _("This submission was regraded after you opened the page (or someone decided meanwhile), "
                 "so your decision was not saved. Look at the current grading below and decide again.")
    return _("That submission is not under integrity review.")


@bp.route("/<code>/integrity")
def integrity_reviews(code: str):
    """The submissions waiting for (or past) an integrity review, with their events."""
    course = course_or_404(code, instructor=True)
    subs = review_queue(course.id)
    users = {u.id: u for u in db.session.scalars(db.select(User).where(User.id.in_({s.user_id for s in subs})))}
    rows = [{"sub": s, "user": users.get(s.user_id),
             "events": [{**e, "source_line": source_line(s, e)} for e in events_of(s)]} for s in subs]
    pending = sum(1 for s in subs if s.review_status == "pending")
    return render_template("dashboard/integrity.html", course=course, rows=rows, pending=pending)


@bp.post("/<code>/integrity/<int:submission_id>")
def integrity_decide(code: str, submission_id: int):
    """Accept or reject one submission under review (a reason is required)."""
    course = course_or_404(code, instructor=True)
    sub = course_submission_or_404(course.id, submission_id)
    try:
        decide(sub, request.form.get("decision", ""), request.form.get("reason", ""), current_user.id,
               _seen_run(request.form.get("run")))
    except ActionError as err:
        db.session.rollback()
        flash(_refusal(err.code), "error")
        return redirect(url_for("dashboard.integrity_reviews", code=code, _anchor=f"sub-{sub.id}")), 303
    flash(_("Decision recorded in the audit log."), "info")
    return redirect(url_for("dashboard.integrity_reviews", code=code, _anchor=f"sub-{sub.id}"))
