"""Integrity review end to end through the web app: the worker stores a ``needs_review`` report
(0 points, counted as an attempt), the student sees a neutral sentence in both languages and no
detection detail, the instructor sees the events and accepts or rejects with a reason (audited)."""
from __future__ import annotations

import copy

from server.scores.models import AuditEntry
from server.extensions import db
from server.models import Submission, SubmissionStatus
from tests.server.conftest import SAMPLE_REPORT

TEACHER = ("teacher", "teacher-pass")
SECRET_DETAIL = "gc.get_objects at train.py:13"


def _review_report() -> dict:
    report = copy.deepcopy(SAMPLE_REPORT)
    report.update(status="needs_review", score=0.0,
                  summary={"zh": "本次提交需要助教复核。", "en": "This submission needs a review."},
                  integrity={"computed_score": 5.0, "events": [
                      {"source": "harness", "kind": "gc.get_objects", "rank": 0, "run": "n2", "detail": SECRET_DETAIL},
                      {"source": "static", "kind": "scan", "rank": None, "detail": "train.py:7: import gc <b>x</b>"}]})
    return report


def _store(app, make_sub, report: dict) -> int:
    """What the worker does for a job: take the lease, then store the report (real code path)."""
    from server.grading.lifecycle import claim, store_report as store

    sid = make_sub("alice", status="queued")
    with app.app_context():
        token = claim(sid)
        assert token is not None
        assert store(sid, token, report) == "graded"
    return sid


def test_review_from_worker_to_student_to_instructor(app, client, auth, make_sub):
    sid = _store(app, make_sub, _review_report())
    with app.app_context():
        sub = db.session.get(Submission, sid)
        assert (sub.status, sub.score, sub.review_status, sub.computed_score) == (
            SubmissionStatus.GRADED.value, 0.0, "pending", 5.0)
        assert sub.counts_as_attempt

    auth.login("alice", "alice-pass")
    for lang, sentence in (("en", "waiting for a review by the teaching staff"), ("zh_CN", "正在等待助教复核")):
        page = client.get(f"/submissions/{sid}/report?lang={lang}").get_data(as_text=True)
        assert sentence in page
        assert SECRET_DETAIL not in page and "gc.get_objects" not in page and "import gc" not in page
    assert client.get("/dashboard/DIST101/integrity").status_code in (302, 404)  # not for students
    auth.logout()

    auth.login(*TEACHER)
    page = client.get("/dashboard/DIST101/integrity?lang=en").get_data(as_text=True)
    assert SECRET_DETAIL in page and "&lt;b&gt;x&lt;/b&gt;" in page  # events shown, escaped
    assert "Waiting for a decision: 1" in page
    assert "Integrity review" in client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)  # linked
    assert "诚信复核" in client.get("/dashboard/DIST101/integrity?lang=zh_CN").get_data(as_text=True)

    run = _run_in_form(page, sid)  # the grading the decision is about
    r = client.post(f"/dashboard/DIST101/integrity/{sid}", data={"decision": "accept", "reason": "  ", "run": run})
    assert r.status_code == 303  # a reason is required: nothing changed
    with app.app_context():
        assert db.session.get(Submission, sid).review_status == "pending"

    r = client.post(f"/dashboard/DIST101/integrity/{sid}", data={"decision": "accept", "reason": "gc used for a leak hunt",
                                                                 "run": run})
    assert r.status_code == 302
    with app.app_context():
        sub = db.session.get(Submission, sid)
        assert (sub.score, sub.review_status, sub.review_reason) == (5.0, "accepted", "gc used for a leak hunt")
        entry = db.session.scalar(db.select(AuditEntry).where(AuditEntry.target == f"sub:{sid}/integrity"))
        assert (entry.old, entry.new) == (0.0, 5.0) and entry.reason.startswith("accept:")

    r = client.post(f"/dashboard/DIST101/integrity/{sid}", data={"decision": "reject", "reason": "forged records", "run": run})
    with app.app_context():
        sub = db.session.get(Submission, sid)
        assert (sub.score, sub.review_status) == (0.0, "rejected")
        assert db.session.scalar(db.select(db.func.count(AuditEntry.id)).where(
            AuditEntry.target == f"sub:{sid}/integrity")) == 2
    auth.logout()

    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}/report?lang=en").get_data(as_text=True)
    assert "this submission counts 0 points" in page and "forged records" not in page


def test_a_clean_grading_is_not_under_review_and_others_cannot_decide(app, client, auth, make_sub):
    sid = _store(app, make_sub, copy.deepcopy(SAMPLE_REPORT))
    with app.app_context():
        sub = db.session.get(Submission, sid)
        assert (sub.score, sub.review_status) == (5.0, None)
    auth.login(*TEACHER)
    r = client.post(f"/dashboard/DIST101/integrity/{sid}", data={"decision": "accept", "reason": "why not"})
    assert r.status_code == 303  # not under review: refused
    assert client.post("/dashboard/DIST101/integrity/999999", data={"decision": "accept", "reason": "x"}).status_code == 404
    auth.logout()
    auth.login("alice", "alice-pass")
    r = client.post(f"/dashboard/DIST101/integrity/{sid}", data={"decision": "accept", "reason": "me"})
    assert r.status_code == 404


def _run_in_form(page: str, sid: int) -> str:
    import re

    form = page.split(f'id="sub-{sid}"')[1].split("</form>")[0]
    return re.search(r'name="run" value="(\d+)"', form).group(1)


def _regrade(app, sid: int, report: dict | None) -> None:
    """A regrade the way the dashboard and the worker do it: back to the queue, then (if a report
    is given) a new run stores it."""
    from server.grading import lifecycle

    with app.app_context():
        assert lifecycle.reset_for_regrade(sid)
        db.session.commit()
        if report is not None:
            token = lifecycle.claim(sid)
            assert lifecycle.store_report(sid, token, report) == "graded"


def _audits(app, sid: int) -> int:
    with app.app_context():
        return db.session.scalar(db.select(db.func.count(AuditEntry.id)).where(
            AuditEntry.target == f"sub:{sid}/integrity"))


def test_a_decision_on_a_grading_replaced_meanwhile_writes_nothing_and_says_so(app, client, auth, make_sub):
    sid = _store(app, make_sub, _review_report())
    auth.login(*TEACHER)
    seen = _run_in_form(client.get("/dashboard/DIST101/integrity?lang=en").get_data(as_text=True), sid)

    # regraded while the teacher was reading: queued again (the old review fields are kept meanwhile)
    _regrade(app, sid, None)
    r = client.post(f"/dashboard/DIST101/integrity/{sid}?lang=en",
                    data={"decision": "accept", "reason": "looked fine", "run": seen}, follow_redirects=True)
    assert "regraded after you opened" in r.get_data(as_text=True)
    with app.app_context():
        sub = db.session.get(Submission, sid)
        assert (sub.status, sub.score, sub.review_status) == ("queued", None, "pending")  # as the regrade left it
    assert _audits(app, sid) == 0  # nothing written, nothing audited

    # ... and graded again, with another computed grade: the old page's decision is still stale
    newer = _review_report()
    newer["integrity"]["computed_score"] = 3.0
    with app.app_context():
        from server.grading import lifecycle
        token = lifecycle.claim(sid)
        assert lifecycle.store_report(sid, token, newer) == "graded"
    r = client.post(f"/dashboard/DIST101/integrity/{sid}?lang=zh_CN",
                    data={"decision": "accept", "reason": "looked fine", "run": seen}, follow_redirects=True)
    assert "重新评分" in r.get_data(as_text=True)
    with app.app_context():
        sub = db.session.get(Submission, sid)
        assert (sub.score, sub.review_status, sub.computed_score) == (0.0, "pending", 3.0)
    assert _audits(app, sid) == 0

    # a form without the grading it was based on is refused the same way (fail closed)
    client.post(f"/dashboard/DIST101/integrity/{sid}", data={"decision": "reject", "reason": "x"})
    assert _audits(app, sid) == 0

    # the fresh page decides on the new grading, and the audit says exactly what was written
    fresh = _run_in_form(client.get("/dashboard/DIST101/integrity?lang=en").get_data(as_text=True), sid)
    assert fresh != seen
    r = client.post(f"/dashboard/DIST101/integrity/{sid}", data={"decision": "accept", "reason": "ok", "run": fresh})
    assert r.status_code == 302
    with app.app_context():
        sub = db.session.get(Submission, sid)
        assert (sub.score, sub.review_status) == (3.0, "accepted")
        entry = db.session.scalar(db.select(AuditEntry).where(AuditEntry.target == f"sub:{sid}/integrity"))
        assert (entry.old, entry.new) == (0.0, 3.0)


def test_a_decision_cannot_clobber_a_score_changed_between_reading_and_writing(app, make_sub):
    """Two decisions from the same page: the second one's 'old score' is no longer the row's,
    so the compare-and-set refuses it instead of auditing a change from a value that was not there."""
    from server.dashboard import integrity
    from server.scores.actions import ActionError

    sid = _store(app, make_sub, _review_report())
    with app.app_context():
        stale = db.session.get(Submission, sid)
        run = stale.grading_runs
        db.session.expunge(stale)  # what a second request read before the first one wrote
        integrity.decide(db.session.get(Submission, sid), "accept", "fine", 1, run)
        try:
            integrity.decide(stale, "reject", "no", 1, run)
        except ActionError as err:
            assert err.code == "stale"
        else:
            raise AssertionError("a decision over a score it did not see went through")
        db.session.rollback()
        assert (db.session.get(Submission, sid).score, db.session.get(Submission, sid).review_status) == (5.0, "accepted")
    assert _audits(app, sid) == 1
