"""Regrade requests per check: a student asks about one check of their graded, released
submission with a reason, once per check, while the course's window is open; the instructor's
queue shows the report, the check and the reason, with two answers (rerun the grader, or change
the check's score with a reply); the student sees the answer on the report, and the gradebook
counts it like any other decision (audited)."""
from __future__ import annotations

from datetime import timedelta

import pytest

from server.scores.gradebook import build_gradebook
from server.scores.models import AuditEntry, Regrade
from server.extensions import db
from server.models import Course, Submission, utcnow
from server.scores.regrade_requests import RegradeRequest

CHECK = "speedup.ratio"  # 1 / 6 points in the sample report
REASON = "My speed-up was measured on a busy machine"


def _ask(client, sid: int, check: str = CHECK, reason: str = REASON, lang: str = "en"):
    return client.post(f"/submissions/{sid}/regrade-request?lang={lang}", data={"check": check, "reason": reason},
                       follow_redirects=True)


def _cell(app) -> float:
    with app.app_context():
        book = build_gradebook(db.session.scalar(db.select(Course)))
        row = next(r for r in book.rows if r.username == "alice")
        return row.cells["hw:hello_ddp"].score


def _open(app) -> list:
    with app.app_context():
        return [(r.submission_id, r.check_id, r.reason, r.state) for r in db.session.scalars(db.select(RegradeRequest))]


def test_ask_once_then_the_teacher_changes_the_score(app, client, auth, make_sub) -> None:
    sid = make_sub()
    auth.login()
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "Ask for a regrade of this check" in page
    assert "请求重新评分" in client.get(f"/submissions/{sid}?lang=zh_CN").get_data(as_text=True)
    resp = _ask(client, sid)
    assert resp.status_code == 200 and "Regrade requested" in resp.get_data(as_text=True)
    assert _open(app) == [(sid, CHECK, REASON, "open")]
    again = _ask(client, sid, reason="again")
    assert "already asked" in again.get_data(as_text=True) and len(_open(app)) == 1
    assert _cell(app) == 5.0

    auth.logout()
    auth.login("teacher", "teacher-pass")
    queue = client.get("/dashboard/DIST101/regrade-requests?lang=en").get_data(as_text=True)
    assert REASON in queue and "Speed-up" in queue and f"/submissions/{sid}" in queue
    req_id = queue.split('data-request="')[1].split('"')[0]
    bad = client.post("/dashboard/DIST101/regrade-requests", data={"request": req_id, "action": "score",
                                                                   "points": "7", "reply": "no"})
    assert bad.status_code == 400 and _cell(app) == 5.0  # over the check's 6 points: refused, nothing changed
    ok = client.post("/dashboard/DIST101/regrade-requests?lang=en",
                     data={"request": req_id, "action": "score", "points": "4", "reply": "Fair: the host was overloaded."},
                     follow_redirects=True)
    assert ok.status_code == 200 and REASON not in ok.get_data(as_text=True)  # the queue is empty now
    assert _cell(app) == 8.0  # 5 - 1 + 4
    with app.app_context():
        audit = db.session.scalars(db.select(AuditEntry)).all()
        assert [(a.target, a.old, a.new) for a in audit] == [(f"sub:{sid}/regrade.{CHECK}", 1.0, 4.0)]

    auth.logout()
    auth.login()
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "Fair: the host was overloaded." in page and "8 / 10" in page


def test_rerun_puts_the_submission_back_in_the_queue(app, client, auth, make_sub) -> None:
    sid = make_sub()
    auth.login()
    _ask(client, sid)
    auth.logout()
    auth.login("teacher", "teacher-pass")
    with app.app_context():
        req_id = db.session.scalar(db.select(RegradeRequest.id))
    client.post("/dashboard/DIST101/regrade-requests", data={"request": req_id, "action": "rerun", "reply": "Ran it again."})
    with app.app_context():
        assert db.session.get(Submission, sid).status == "queued"
        assert db.session.scalar(db.select(Regrade.submission_id)) == sid
        assert db.session.get(RegradeRequest, int(req_id)).state == "rerun"


@pytest.mark.parametrize("case", ["not_owner", "no_check", "empty", "long", "held", "window"])
def test_refusals_store_nothing(app, client, auth, make_sub, case) -> None:
    sid = make_sub(finished_at=utcnow() - timedelta(days=30)) if case == "window" else make_sub()
    if case == "held":
        auth.login("teacher", "teacher-pass")
        client.post("/dashboard/DIST101/homework/hello_ddp/release", data={"action": "mode", "mode": "manual"})
        auth.logout()
    auth.login("bob", "bob-pass") if case == "not_owner" else auth.login()
    check = "no.such.check" if case == "no_check" else CHECK
    reason = "" if case == "empty" else ("x" * 1001 if case == "long" else REASON)
    resp = _ask(client, sid, check, reason)
    assert resp.status_code in (200, 404)
    assert _open(app) == []


@pytest.mark.parametrize("lang", ["zh_CN", "en"])
def test_new_points_show_on_the_check_and_in_the_summary(app, client, auth, make_sub, lang) -> None:
    """A request answered with new points left the check at its old score ("skipped 0 / 6" with "the
    teacher's answer: 6 / 6" under it) and the summary as it was; the check now carries the points
    the score counts, marked as the teacher's, and the summary says what changed."""
    import copy
    import re

    from tests.server.conftest import SAMPLE_REPORT

    report = copy.deepcopy(SAMPLE_REPORT)
    check = next(c for c in report["checks"] if c["id"] == CHECK)
    check.update(status="skip", points=0.0, message={"zh": "速度待校准。", "en": "Speed pending calibration."})
    report["score"] = 4.0
    report["summary"] = {"zh": "全部通过；速度待校准。", "en": "Everything passed; speed pending calibration."}
    sid = make_sub(report_json=report, score=4.0)
    auth.login()
    _ask(client, sid)
    auth.logout()
    auth.login("teacher", "teacher-pass")
    queue = client.get("/dashboard/DIST101/regrade-requests?lang=en").get_data(as_text=True)
    req_id = queue.split('data-request="')[1].split('"')[0]
    client.post("/dashboard/DIST101/regrade-requests", data={"request": req_id, "action": "score", "points": "6",
                                                             "reply": "Calibrated by hand."})
    auth.logout()
    auth.login()
    page = client.get(f"/submissions/{sid}?lang={lang}").get_data(as_text=True)
    row = page.split(f'check-title">{check["title"]["zh" if lang == "zh_CN" else "en"]}')[1].split("</li>")[0]
    head = page.split('class="check-head"')[2 if report["checks"].index(check) == 1 else 1].split("</div>")[0]
    assert re.search(r'check-points">6 / 6<', row) and "badge-pass" in head, head + row
    assert "10 / 10" in page
    summary = page.split('class="summary"')[1].split("</p>")[0]
    assert ("老师" in summary if lang == "zh_CN" else "teacher" in summary) and "6" in summary, summary
