"""One number for "the stored score plus what hand-given scores add" on every page and export.

A homework-2 submission gets all three kinds of hand-given score at once: a manual cell graded on
the instructor's page, an annotation the student asked about (the decision replaces its automatic
points) and an annotation the reading was unsure of (the decision adds what waited). The student's
report page, the attempt list, the gradebook (page, Canvas and Moodle CSV), the Gradescope export
and the JSON-lines archive must then say the same total (``server.scores.hand_scores``).
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from server.extensions import db
from tests.fixtures.annotation_reports import STAGE, stage_check, upload_report

# An asked field is one that counted at once: its reading earned trust.
pytestmark = pytest.mark.usefixtures("annotation_readings_trusted")

HOMEWORK2 = Path(__file__).resolve().parents[3] / "assignments" / "config_annotation"
UNSURE = "full_shard：切梯度和优化器状态，参数每卡一份？可能吧"  # the reading waits for a teacher
BATCH = "field.train_batch_size"
CELL = "explain_zero3"  # a free-text cell a person grades
CELL_MAX = 4.0


@pytest.fixture(autouse=True)
def _homework2_published(hw) -> None:
    (Path(os.environ["DISTGRADE_ASSIGNMENTS_DIR"]) / "config_annotation").symlink_to(HOMEWORK2)


def with_manual_cell(report: dict) -> dict:
    """``report`` plus one manual cell as the notebook grader leaves it (0 points until graded)."""
    cell = {"cell_id": CELL, "max_points": CELL_MAX, "source": "ZeRO-3 also shards the parameters."}
    report["checks"].append({
        "id": f"manual.{CELL}", "title": {"zh": "人工评分：解释", "en": "Graded by hand: explanation"},
        "status": "skip", "points": 0.0, "max_points": CELL_MAX,
        "message": {"zh": "等待老师评分。", "en": "Waiting for the teacher."}, "hint": {"zh": "", "en": ""},
        "evidence": {"manual_cells": [cell]}})
    report["max_score"] = round(report["max_score"] + CELL_MAX, 4)
    return report


def _token(page: str) -> str:
    return page.split('name="csrf_token" value="')[1].split('"')[0] if 'name="csrf_token"' in page else ""


def hand_graded_submission(client, auth, make_sub) -> tuple[int, dict, float]:
    """A submission with a graded manual cell, an asked-and-decided field and an unsure-then-decided
    field, each through the real routes; returns (id, stored report, the total that must show)."""
    rep = with_manual_cell(upload_report(UNSURE))
    stage, batch = stage_check(rep), next(c for c in rep["checks"] if c["id"] == BATCH)
    assert stage["evidence"]["review"] == "pending" and stage["points"] == 0.0
    assert batch["points"] > 0 and not batch["evidence"].get("review")
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    client.post(f"/submissions/{sid}/ask", data={"check": BATCH, "comment": "all three factors are there",
                                                 "csrf_token": _token(page)})
    auth.logout()
    auth.login("teacher", "teacher-pass")
    decide = "/dashboard/DIST101/review/annotations/decide"
    assert client.post(decide, data={"item": [f"{sid}:{BATCH}"], "verdict": "partial", "percent": "50",
                                     "group": "a"}).status_code == 302
    assert client.post(decide, data={"item": [f"{sid}:{STAGE}"], "verdict": "full", "group": "u"}).status_code == 302
    assert client.post(f"/dashboard/DIST101/submissions/{sid}/manual",
                       data={"cell_id": CELL, "score": "2.5", "comment": "half of it"}).status_code == 302
    auth.logout()
    want = round(rep["score"] - batch["points"] + round(batch["max_points"] / 2, 2)
                 + stage["evidence"]["review_points"] + 2.5, 4)
    assert want != pytest.approx(rep["score"])
    return sid, rep, want


def _gradebook_cell(page: str, username: str, key: str = "hw:hello_ddp") -> float:
    """The student's cell of column ``key`` as the gradebook page shows it."""
    heads = page.split("<thead>")[1].split("</thead>")[0].split("<th")[2:]  # after the students' column
    col = next(i for i, h in enumerate(heads) if key in h or key.replace(":", "%3A") in h)
    row = page.split(f'/students/{username}"')[1].split("</tr>")[0]
    cell = row.split('<td class="num')[1 + col].split(">", 1)[1]
    return float(cell.split("<")[0].strip())


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))


def test_every_page_and_export_says_the_same_total(client, auth, make_sub) -> None:
    sid, rep, want = hand_graded_submission(client, auth, make_sub)

    auth.login("alice", "alice-pass")
    report_page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert float(report_page.split('class="score-num">')[1].split("<")[0]) == pytest.approx(want)
    assert "Confirmed by the teacher" in report_page and "half of it" in report_page  # the merged report shows
    history = client.get("/homework/DIST101/hello_ddp?lang=en").get_data(as_text=True)
    row = history.split(f'/submissions/{sid}"')[1].split("</tr>")[0]
    assert f"{want:g} / {rep['max_score']:g}" in row
    auth.logout()

    auth.login("teacher", "teacher-pass")
    staff = client.get("/dashboard/DIST101/students/alice?lang=en").get_data(as_text=True).split(f'id="sub-{sid}"')[1]
    summary = staff.split("<summary>")[1].split("</summary>")[0]
    assert f"{want:g} / {rep['max_score']:g}" in summary  # the teacher's view of the student says it too
    assert float(staff.split('class="score-num">')[1].split("<")[0]) == pytest.approx(want)
    listing = client.get("/instructor/DIST101/hello_ddp?lang=en").get_data(as_text=True)
    assert f"{want:g} / {rep['max_score']:g}" in listing.split(f'/submissions/{sid}"')[1].split("</tr>")[0]
    book = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    assert _gradebook_cell(book, "alice") == pytest.approx(want)
    canvas = _csv(client.get("/dashboard/DIST101/export/canvas.csv").get_data(as_text=True))
    col = next(i for i, h in enumerate(canvas[0]) if h.endswith("[hw:hello_ddp]"))
    assert float(next(r for r in canvas if r[2] == "alice")[col]) == pytest.approx(want)
    moodle = _csv(client.get("/dashboard/DIST101/export/moodle.csv").get_data(as_text=True))
    col = next(i for i, h in enumerate(moodle[0]) if "[hw:hello_ddp]" in h)
    assert float(next(r for r in moodle if r[1] == "alice")[col]) == pytest.approx(want)
    gradescope = client.get(f"/dashboard/DIST101/submissions/{sid}/gradescope.json").get_json(force=True)
    assert gradescope["score"] == pytest.approx(want)
    lines = client.get("/dashboard/DIST101/export/reports.jsonl").get_data(as_text=True).splitlines()
    record = next(r for r in map(json.loads, lines) if r["submission"] == sid)
    assert record["counted_score"] == pytest.approx(want)
    assert record["grader_score"] == pytest.approx(rep["score"])  # the archive keeps what the grader stored
    assert record["hand_given_points"] == pytest.approx(want - rep["score"])
    assert record["report"]["checks"] == rep["checks"]  # the grader's own report, unmerged


def test_the_archive_names_the_counted_score_for_a_submission_without_hand_scores(client, auth, make_sub) -> None:
    sid = make_sub("alice")  # SAMPLE_REPORT: 5 / 10, nothing given by hand
    make_sub("bob", status="error")
    auth.login("teacher", "teacher-pass")
    lines = client.get("/dashboard/DIST101/export/reports.jsonl").get_data(as_text=True).splitlines()
    records = {r["submission"]: r for r in map(json.loads, lines)}
    assert (records[sid]["counted_score"], records[sid]["grader_score"], records[sid]["hand_given_points"]) == (5.0, 5.0, 0.0)
    error = next(r for r in records.values() if r["status"] == "error")
    assert error["counted_score"] is None and error["grader_score"] is None and error["hand_given_points"] == 0.0
    assert "score" not in records[sid]  # no ambiguous name: which score it is is in the key
    for lang, words in (("en", "counted_score is its score that counts"), ("zh_CN", "counted_score 是这次提交计入成绩的得分")):
        assert words in client.get(f"/dashboard/DIST101/?lang={lang}").get_data(as_text=True)  # the export says so


@pytest.mark.parametrize("review_status", ["pending", "rejected"])
def test_hand_given_points_add_nothing_while_a_submission_counts_zero(app, client, auth, make_sub,
                                                                      review_status) -> None:
    """Integrity review: a submission waiting for it (or rejected) counts 0, as its page says; a
    manual cell graded meanwhile must not lift it above 0 on any page or export."""
    from server.scores.gradebook import build_gradebook
    from server.models import Course, Submission

    sid, rep, want = hand_graded_submission(client, auth, make_sub)
    with app.app_context():
        sub = db.session.get(Submission, sid)
        sub.review_status, sub.computed_score, sub.score = review_status, rep["score"], 0.0
        db.session.commit()
        book = build_gradebook(db.session.scalar(db.select(Course)))
        row = next(r for r in book.rows if r.username == "alice")
        assert row.cells["hw:hello_ddp"].score == 0.0
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    history = client.get("/homework/DIST101/hello_ddp?lang=en").get_data(as_text=True)
    row = history.split(f'/submissions/{sid}"')[1].split("</tr>")[0]
    if review_status == "pending":  # "under review", not a bare 0 (and never the hand-lifted score)
        assert "Under review" in page and 'class="score-num"' not in page and "under review" in row
        assert f"/ {rep['max_score']:g}" not in row
    else:
        assert float(page.split('class="score-num">')[1].split("<")[0]) == 0.0
        assert f"0 / {rep['max_score']:g}" in row
    auth.logout()
    auth.login("teacher", "teacher-pass")
    assert client.get(f"/dashboard/DIST101/submissions/{sid}/gradescope.json").get_json(force=True)["score"] == 0.0
    lines = client.get("/dashboard/DIST101/export/reports.jsonl").get_data(as_text=True).splitlines()
    record = next(r for r in map(json.loads, lines) if r["submission"] == sid)
    assert (record["counted_score"], record["hand_given_points"]) == (0.0, 0.0)


def test_while_another_submission_is_regraded_the_hand_graded_one_keeps_its_hand_given_points(app, make_sub) -> None:
    """The gradebook's path for a student with a submission back in the queue reads the others
    again: by the same definition, so a graded manual cell still counts meanwhile."""
    from server.scores import actions
    from server.scores.gradebook import build_gradebook
    from server.models import Course, Submission, User

    rep = with_manual_cell(upload_report(UNSURE))
    best = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    other = make_sub("alice")  # SAMPLE_REPORT: 5 points, below ``best``
    assert rep["score"] > 5.0
    with app.app_context():
        teacher = db.session.scalar(db.select(User.id).where(User.username == "teacher"))
        actions.set_cell_score(db.session.get(Submission, best), CELL, "2.5", "half of it", teacher)
        course = db.session.scalar(db.select(Course))
        cell = lambda: next(r for r in build_gradebook(course).rows if r.username == "alice").cells["hw:hello_ddp"]
        assert cell().score == pytest.approx(rep["score"] + 2.5)
        actions.regrade([db.session.get(Submission, other)], teacher)
        assert db.session.get(Submission, other).status == "queued"
        assert cell().score == pytest.approx(rep["score"] + 2.5)


def test_the_homework_list_best_score_counts_hand_given_points(app, client, auth, make_sub) -> None:
    """Someone with no gradebook row (an instructor trying the homework) sees "Best score" on the
    homework list: by the same definition, with a graded manual cell in it."""
    from server.scores import actions
    from server.models import Submission, User

    rep = with_manual_cell(upload_report(UNSURE))
    sid = make_sub("teacher", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    with app.app_context():
        teacher = db.session.scalar(db.select(User.id).where(User.username == "teacher"))
        actions.set_cell_score(db.session.get(Submission, sid), CELL, "2.5", "", teacher)
    auth.login("teacher", "teacher-pass")
    page = client.get("/homework/?lang=en").get_data(as_text=True)
    assert f"Best score: <strong>{rep['score'] + 2.5:g} / " in page


def test_homework_statistics_count_the_submission_the_gradebook_counts(app, make_sub) -> None:
    """Per-check statistics look at each student's counted submission: with the 'best' policy the
    one whose score with hand-given points is highest, as in the gradebook."""
    from server.dashboard import stats
    from server.scores import actions
    from server.models import Submission, User

    rep = with_manual_cell(upload_report(UNSURE))
    hand = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    make_sub("alice", score=rep["score"] + 1.0)  # SAMPLE_REPORT's checks, stored 1 point higher
    with app.app_context():
        teacher = db.session.scalar(db.select(User.id).where(User.username == "teacher"))
        actions.set_cell_score(db.session.get(Submission, hand), CELL, "2.5", "", teacher)
        by_id = {c.check_id: c for c in stats.homework_stats(1, "hello_ddp").checks}
    assert by_id[f"manual.{CELL}"].students == 1 and by_id["launch.ranks"].students == 0


def test_the_exports_round_as_the_pages_do(app, client, auth, make_sub) -> None:
    """The CSV and Gradescope exports printed 11.5787 where every page shows 11.58."""
    from coursework.text import score_text

    sid = make_sub("alice", score=11.5787, max_score=20.0)
    auth.login("teacher", "teacher-pass")
    book = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    assert score_text(11.5787) == "11.58" and "11.58" in book
    canvas = _csv(client.get("/dashboard/DIST101/export/canvas.csv").get_data(as_text=True))
    col = next(i for i, h in enumerate(canvas[0]) if h.endswith("[hw:hello_ddp]"))
    assert next(r for r in canvas if r[2] == "alice")[col] == "11.58"
    moodle = _csv(client.get("/dashboard/DIST101/export/moodle.csv").get_data(as_text=True))
    col = next(i for i, h in enumerate(moodle[0]) if "[hw:hello_ddp]" in h)
    assert next(r for r in moodle if r[1] == "alice")[col] == "11.58"
    gradescope = client.get(f"/dashboard/DIST101/submissions/{sid}/gradescope.json").get_json(force=True)
    assert gradescope["score"] == 11.58
