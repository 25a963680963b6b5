"""Homework 2's unsure annotations go to a teacher: the field earns nothing and the
student's report says a teacher will confirm what the reading found; similar annotations of
several students are one group; one decision sets their points, the reports and the gradebook
follow, and the decision is kept as a graded example."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.dashboard import review_annotation
from server.scores.gradebook import build_gradebook
from server.scores.models import ManualCellScore
from server.extensions import db
from server.models import Course
from tests.fixtures.annotation_reports import upload_report

# The unsure-reading flow on fields that otherwise count at once (their reading earned trust); the
# untrusted default has its own tests (tests/graders/test_config_annotation_trust.py, test_hw2_provisional.py).
pytestmark = pytest.mark.usefixtures("annotation_readings_trusted")

HOMEWORK2 = Path(__file__).resolve().parents[3] / "assignments" / "config_annotation"


@pytest.fixture(autouse=True)
def _homework2_published(request) -> None:
    """Homework 2 beside the placeholder the web fixtures publish: its reports name it, and a decision's
    wording comes from its assignment.json."""
    if "make_sub" in request.fixturenames:
        request.getfixturevalue("hw")
        (Path(os.environ["DISTGRADE_ASSIGNMENTS_DIR"]) / "config_annotation").symlink_to(HOMEWORK2)


UNSURE = "full_shard：切梯度和优化器状态，参数每卡一份？可能吧"  # stage 3, read as right but hedged


def test_an_unsure_field_is_held_for_the_teacher_with_the_reading() -> None:
    report = upload_report(UNSURE)
    stage = next(c for c in report["checks"] if c["id"] == "field.zero_optimization.stage")
    assert stage["status"] == "warn" and stage["points"] == 0 and stage["max_points"] > 0
    assert stage["evidence"]["review"] == "pending" and stage["evidence"]["review_points"] == stage["max_points"]
    assert stage["message"]["en"].startswith("Waiting for the teacher") and "ZeRO sharding stage" in stage["message"]["en"]
    assert stage["message"]["zh"].startswith("等待老师确认")
    assert report["max_score"] == 100  # the points wait; the total does not shrink
    sure = upload_report("shards parameters, gradients and optimizer states (= FSDP full_shard)")
    assert not any(c["evidence"].get("review") for c in sure["checks"])


def test_a_grouped_decision_sets_points_reports_and_gradebook(app, client, auth, make_sub) -> None:
    report, other = upload_report(UNSURE), upload_report("参数每卡一份，梯度切分")
    ids = {}
    for name, rep in (("alice", report), ("bob", upload_report(UNSURE + " ")), ("teacher", other)):
        ids[name] = make_sub(name, score=rep["score"], max_score=rep["max_score"], report_json=rep)
    student_page = None
    auth.login("alice", "alice-pass")
    student_page = client.get(f"/submissions/{ids['alice']}?lang=en").get_data(as_text=True)
    assert "Waiting for the teacher" in student_page and "ZeRO sharding stage" in student_page
    auth.logout()

    auth.login("teacher", "teacher-pass")
    queue = client.get("/dashboard/DIST101/review/?lang=en").get_data(as_text=True)
    assert "Homework annotations waiting: 3 in 2 groups" in queue
    page = client.get("/dashboard/DIST101/review/annotations?lang=en").get_data(as_text=True)
    assert page.count('class="card rgroup"') == 2 and "2 similar answers" in page and "Automatic reading" in page
    assert "注释复核" in client.get("/dashboard/DIST101/review/annotations?lang=zh_CN").get_data(as_text=True)
    group = page.split('class="card rgroup"')[1]
    items = [x.split('"')[0] for x in group.split('name="item" value="')[1:]]
    assert sorted(int(i.split(":")[0]) for i in items) == sorted([ids["alice"], ids["bob"]])
    resp = client.post("/dashboard/DIST101/review/annotations/decide",
                       data={"item": items, "verdict": "partial", "percent": "50", "group": "g"})
    assert resp.status_code == 302
    stage_max = next(c["max_points"] for c in report["checks"] if c["id"] == "field.zero_optimization.stage")
    with app.app_context():
        rows = db.session.scalars(db.select(ManualCellScore)).all()
        assert sorted(r.submission_id for r in rows) == sorted([ids["alice"], ids["bob"]])
        assert all(r.cell_id == "field.zero_optimization.stage" and r.score == round(stage_max / 2, 2) for r in rows)
        book = build_gradebook(db.session.scalar(db.select(Course)))
        item = book.item("hw:hello_ddp")  # the placeholder homework the submissions are stored under
        alice = next(r for r in book.rows if r.username == "alice")
        assert alice.cells[item.key].score == round(report["score"] + stage_max / 2, 2)
        assert [g.first.username for g in review_annotation.groups(1)] == ["teacher"]  # only the other group is left
        examples = review_annotation.decisions_as_examples(1)
        assert examples[0]["expect"] == "partial" and examples[0]["field"] == "zero_optimization.stage"
        assert examples[0]["value"] == 3 and examples[0]["answer"] == UNSURE
    again = client.post("/dashboard/DIST101/review/annotations/decide",
                        data={"item": items, "verdict": "full", "group": "g"}, follow_redirects=True)
    assert "请至少勾选一条仍待确认的回答" in again.get_data(as_text=True)  # decided once: nothing open any more (the zh page set the language)
    auth.logout()
    auth.login("alice", "alice-pass")
    student_page = client.get(f"/submissions/{ids['alice']}?lang=en").get_data(as_text=True)
    assert "Confirmed by the teacher" in student_page and "Waiting for the teacher" not in student_page


def _confirm_report(note: str) -> dict:
    """An upload whose stage note the reading is sure of, graded where the course confirms every
    full mark (``fields.confirm_full_marks: all``)."""
    from coursework.report import GradeReport
    from graders.config_annotation import core
    from tests.fixtures.annotation_reports import config_source

    cfg = core.load_config()
    cfg["fields"]["confirm_full_marks"] = "all"
    r = GradeReport(assignment="config_annotation")
    for c in core.grade_config_text(config_source(note), "c.json", cfg):
        r.add(c)
    return r.to_dict()


SURE = "shards parameters, gradients and optimizer states (= FSDP full_shard)"


def test_a_teacher_can_leave_one_answer_out_of_a_group_decision(app, client, auth, make_sub) -> None:
    """Full marks to confirm are grouped by what the reading found, so a wrong note that uses the
    right words can sit among right ones: the teacher unticks it, the decision grades the rest,
    and the unticked one stays open."""
    ids = {name: make_sub(name, score=rep["score"], max_score=rep["max_score"], report_json=rep)
           for name, rep in (("alice", _confirm_report(SURE)), ("bob", _confirm_report(SURE + " ")))}
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/review/annotations?lang=en").get_data(as_text=True)
    assert "Full marks to confirm" in page and "2 similar answers" in page
    assert page.count('type="checkbox" name="item"') >= 2 and "checked" in page
    assert "满分待确认" in client.get("/dashboard/DIST101/review/annotations?lang=zh_CN").get_data(as_text=True)
    stage = f"{ids['alice']}:field.zero_optimization.stage"
    resp = client.post("/dashboard/DIST101/review/annotations/decide?lang=en",
                       data={"item": [stage], "verdict": "full", "group": "g"}, follow_redirects=True)
    assert "1 answer graded" in resp.get_data(as_text=True)
    with app.app_context():
        left = [(p.username, p.check_id) for p in review_annotation.pending(1)]
    assert ("bob", "field.zero_optimization.stage") in left and ("alice", "field.zero_optimization.stage") not in left
    none = client.post("/dashboard/DIST101/review/annotations/decide?lang=en",
                       data={"verdict": "full", "group": "g"}, follow_redirects=True).get_data(as_text=True)
    assert "Tick at least one answer that is still open" in none


def test_c_confirms_an_annotation_groups_suggestion_and_labels_it(app, client, auth, make_sub) -> None:
    """One key confirms the reading's own suggestion for a group of notes; each decided
    note is a labelled example of its field for the reader's earned trust."""
    from server.quiz import labels

    report = upload_report(UNSURE)
    ids = [make_sub(name, score=report["score"], max_score=report["max_score"], report_json=report)
           for name in ("alice", "bob")]
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/review/annotations?lang=en").get_data(as_text=True)
    assert 'data-key="c"' in page and "Confirm the suggestion: 100% of the points" in page
    group = page.split('class="card rgroup"')[1]
    items = [x.split('"')[0] for x in group.split('name="item" value="')[1:]]
    client.post("/dashboard/DIST101/review/annotations/confirm", data={"item": items, "verdict": "suggested", "group": "g"})
    stage = next(c for c in report["checks"] if c["id"] == "field.zero_optimization.stage")
    with app.app_context():
        rows = db.session.scalars(db.select(ManualCellScore)).all()
        assert sorted(r.submission_id for r in rows) == sorted(ids)
        assert all(r.score == stage["evidence"]["review_points"] for r in rows)
        (a,) = labels.agreement_table("annotation:")
        assert a.item == "annotation:deepspeed:zero_optimization.stage" and (a.decided, a.agreed) == (1, 1)
