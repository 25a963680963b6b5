"""Similarity pages: the pairs and clusters of a homework's latest run, one pair side by
side with the shared regions highlighted, and the form that opens an integrity review for the
students of a pair or cluster. Instructors of the course only (students and strangers: 404).

Everything a student wrote reaches the page as text fragments that Jinja escapes; the highlights
are character ranges stored by the run, applied to the texts read again from the submissions.
"""
from __future__ import annotations

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from coursework.similarity import corpus_text
from server.access import course_or_404
from server.scores.actions import ActionError
from server.dashboard.views import bp, hw_in_order
from server.extensions import db
from server.models import CourseAssignment, Submission, SubmissionStatus, User
from server.similarity import jobs
from server.similarity.models import RunStatus, SimilarityRun
from server.similarity.review import evidence_text, open_reviews

MAX_SHOWN = 200  # pairs listed on the page (a run keeps at most 300)


def _homework(course, assignment_id: str | None) -> str | None:
    """The homework asked for; else the one students handed in last (what a teacher comes to
    check), else the one last checked, else the course's first in its own order."""
    ids = [ca.assignment_id for ca in hw_in_order(course.homework)]
    if assignment_id in ids:
        return assignment_id
    handed_in = db.session.scalar(db.select(Submission.assignment_id).where(
        Submission.course_id == course.id, Submission.status == SubmissionStatus.GRADED.value,
        Submission.assignment_id.in_(ids)).order_by(Submission.id.desc()).limit(1))
    if handed_in:
        return handed_in
    last = db.session.scalar(db.select(SimilarityRun.assignment_id).where(SimilarityRun.course_id == course.id)
                             .order_by(SimilarityRun.id.desc()).limit(1))
    return last if last in ids else (ids[0] if ids else None)


def latest_runs(course_id: int, assignment_id: str) -> tuple[SimilarityRun | None, SimilarityRun | None]:
    """(the newest run of any status, the newest finished one) of a homework."""
    q = db.select(SimilarityRun).where(SimilarityRun.course_id == course_id, SimilarityRun.assignment_id == assignment_id)
    newest = db.session.scalar(q.order_by(SimilarityRun.id.desc()).limit(1))
    done = db.session.scalar(q.where(SimilarityRun.status == RunStatus.DONE.value).order_by(SimilarityRun.id.desc()).limit(1))
    return newest, done


def run_or_404(course, run_id: int) -> SimilarityRun:
    run = db.session.get(SimilarityRun, run_id)
    if run is None or run.course_id != course.id or run.status != RunStatus.DONE.value:
        abort(404)
    return run


def _people(result: dict) -> dict[str, dict]:
    """Key -> who and which submission, for every document the result names."""
    subs = {int(k[4:]): k for k in result.get("docs", {}) if k.startswith("sub:")}
    rows = db.session.execute(db.select(Submission.id, Submission.user_id, User.username, User.display_name)
                              .join(User, User.id == Submission.user_id).where(Submission.id.in_(subs))).all()
    out = {k: {"key": k, "reference": True, "name": (result["docs"][k].get("label") or k[4:]), "sub": None}
           for k in result.get("docs", {}) if k.startswith("ref:")}
    for sid, uid, username, display in rows:
        out[subs[sid]] = {"key": subs[sid], "reference": False, "name": display or username, "username": username,
                          "sub": sid, "user_id": uid}
    return out


@bp.route("/<code>/similarity")
def similarity(code: str):
    """Pairs above the threshold (most shared code first) and clusters of the latest run of a homework."""
    course = course_or_404(code, instructor=True)
    hw = _homework(course, request.args.get("hw"))
    newest, done = latest_runs(course.id, hw) if hw else (None, None)
    result = (done.result_json or {}) if done else {}
    people = _people(result) if done else {}
    compared = len(jobs.counted_submissions(course.id, hw)) if hw else 0
    return render_template("dashboard/similarity.html", course=course, hw=hw, newest=newest, run=done, compared=compared,
                           pairs=list(enumerate(result.get("pairs", [])))[:MAX_SHOWN],
                           clusters=list(enumerate(result.get("clusters", []))), people=people,
                           settings=result.get("settings", {}), stats=result.get("stats", {}))


@bp.post("/<code>/similarity/run")
def similarity_run(code: str):
    """Queue a similarity run of one homework now (it starts once no first grading waits)."""
    course = course_or_404(code, instructor=True)
    hw = request.form.get("hw", "")
    if not db.session.scalar(db.select(CourseAssignment.id).where(CourseAssignment.course_id == course.id,
                                                                  CourseAssignment.assignment_id == hw)):
        abort(404)
    jobs.request_run(course.id, hw, "manual", current_user.id)
    flash(_("Similarity check queued. It runs after every submission waiting for its first grading."), "info")
    return redirect(url_for("dashboard.similarity", code=code, hw=hw))


def fragments(text: str, ranges: list[tuple[int, int, int]]) -> list[tuple[str, int | None]]:
    """``text`` cut into (piece, region number or None) along sorted, non-overlapping ranges."""
    out, pos = [], 0
    for start, end, n in sorted(ranges):
        start = max(start, pos)
        end = min(end, len(text))
        if start >= end:
            continue
        if start > pos:
            out.append((text[pos:start], None))
        out.append((text[start:end], n))
        pos = end
    if pos < len(text):
        out.append((text[pos:], None))
    return out


def _text(run: SimilarityRun, key: str) -> str:
    if key.startswith("sub:"):
        return jobs.submission_text(int(key[4:]))
    return corpus_text(jobs.corpus_dir(), run.assignment_id, key[4:]) or ""


@bp.route("/<code>/similarity/<int:run_id>/pair/<int:n>")
def similarity_pair(code: str, run_id: int, n: int):
    """One pair side by side, the shared regions highlighted and numbered alike on both sides."""
    course = course_or_404(code, instructor=True)
    run = run_or_404(course, run_id)
    pairs = (run.result_json or {}).get("pairs", [])
    if not 0 <= n < len(pairs):
        abort(404)
    pair = pairs[n]
    people = _people(run.result_json)
    segs = pair.get("segments", [])
    text_a, text_b = _text(run, pair["a"]), _text(run, pair["b"])
    left = fragments(text_a, [(s[0], s[1], i + 1) for i, s in enumerate(segs)])
    right = fragments(text_b, [(s[2], s[3], i + 1) for i, s in enumerate(segs)])
    region = (pair.get("block") or {}).get("region") or []
    block = [excerpt(text_a, region[0], region[1]), excerpt(text_b, region[2], region[3])] if len(region) == 4 else None
    return render_template("dashboard/similarity_pair.html", course=course, run=run, n=n, pair=pair,
                           a=people.get(pair["a"], {"name": pair["a"]}), b=people.get(pair["b"], {"name": pair["b"]}),
                           left=left, right=right, block=block, settings=(run.result_json or {}).get("settings", {}))


MAX_EXCERPT = 20_000  # characters of one side of the largest region shown above the full texts


def excerpt(text: str, start: int, end: int) -> dict:
    """The whole lines holding ``text[start:end]``, with their first and last line numbers."""
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    first = text.rfind("\n", 0, start) + 1
    stop = text.find("\n", end)
    stop = len(text) if stop < 0 else stop
    return {"text": text[first:min(stop, first + MAX_EXCERPT)], "first": text.count("\n", 0, first) + 1,
            "last": text.count("\n", 0, stop) + 1}


def _evidence(run: SimilarityRun, keys: list[str], pair_ids: list[int], what: str, people: dict) -> dict[int, str]:
    pairs = (run.result_json or {}).get("pairs", [])
    out = {}
    for key in keys:
        person = people.get(key)
        if not person or person.get("sub") is None:
            continue  # an earlier term's file has nobody to review
        mine = [pairs[i] for i in pair_ids if key in (pairs[i]["a"], pairs[i]["b"])]
        others = [people.get(p["b"] if p["a"] == key else p["a"], {}).get("name", "?") for p in mine]
        best = max(mine, key=lambda p: p["shared_tokens"]) if mine else {"score": 0, "shared_tokens": 0}
        out[person["sub"]] = evidence_text(run.id, what, best["score"], best["shared_tokens"], others)
    return out


@bp.post("/<code>/similarity/<int:run_id>/review")
def similarity_review(code: str, run_id: int):
    """Open an integrity review for the students of one pair (``pair=n``) or cluster (``cluster=n``)."""
    course = course_or_404(code, instructor=True)
    run = run_or_404(course, run_id)
    result = run.result_json or {}
    people = _people(result)
    try:
        if request.form.get("cluster") is not None:
            n = int(request.form["cluster"])
            cluster = result.get("clusters", [])[n]
            evidence = _evidence(run, cluster["members"], cluster["pairs"], f"cluster {n + 1}", people)
        else:
            n = int(request.form.get("pair", ""))
            pair = result.get("pairs", [])[n]
            evidence = _evidence(run, [pair["a"], pair["b"]], [n], f"pair {n + 1}", people)
    except (ValueError, IndexError, KeyError):
        abort(404)
    try:
        done = open_reviews(course.id, evidence, request.form.get("reason", ""), current_user.id)
    except ActionError:
        flash(_("A reason is required for every manual change."), "error")
        return redirect(request.referrer or url_for("dashboard.similarity", code=code, hw=run.assignment_id)), 303
    flash(_("Integrity review opened for %(n)s submission(s); %(m)s already under review got the evidence added; "
            "%(k)s skipped (regraded meanwhile or not graded).",
            n=len(done["opened"]), m=len(done["added"]), k=len(done["skipped"])), "info")
    return redirect(url_for("dashboard.integrity_reviews", code=code))
