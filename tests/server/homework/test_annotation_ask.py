"""A student asks a teacher to look at an auto-graded homework-2 annotation: once per
answer, with a comment, only their own graded submission and only a field check of its stored
report; the teacher's queue lists it apart from the unsure ones; a decision replaces the field's
automatic points, and the gradebook and the student's page agree on the result."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.scores.gradebook import build_gradebook
from server.scores.models import AnnotationReviewRequest, AuditEntry, ManualCellScore
from server.extensions import db
from server.models import Course
from tests.fixtures.annotation_reports import STAGE, config_source, stage_check, upload_report

# Asking is about points that counted at once: fields whose reading earned trust.
pytestmark = pytest.mark.usefixtures("annotation_readings_trusted")

HOMEWORK2 = Path(__file__).resolve().parents[3] / "assignments" / "config_annotation"
WRONG = "ZeRO-3 keeps a full copy of the parameters on every card"  # read (confidently) as wrong
UNSURE = "full_shard：切梯度和优化器状态，参数每卡一份？可能吧"


@pytest.fixture(autouse=True)
def _homework2_published(request) -> None:
    if "make_sub" in request.fixturenames:
        request.getfixturevalue("hw")
        (Path(os.environ["DISTGRADE_ASSIGNMENTS_DIR"]) / "config_annotation").symlink_to(HOMEWORK2)


def _ask(client, sid: int, check_id: str = STAGE, comment: str = "ZeRO-3 shards the parameters; I said so", lang="en"):
    page = client.get(f"/submissions/{sid}?lang={lang}").get_data(as_text=True)
    token = page.split('name="csrf_token" value="')[1].split('"')[0] if 'name="csrf_token"' in page else ""
    return client.post(f"/submissions/{sid}/ask?lang={lang}", data={"check": check_id, "comment": comment,
                                                                  "csrf_token": token}, follow_redirects=True)


def _cell(app, username: str) -> float:
    with app.app_context():
        book = build_gradebook(db.session.scalar(db.select(Course)))
        row = next(r for r in book.rows if r.username == username)
        return row.cells[book.item("hw:hello_ddp").key].score


def _requests(app) -> list:
    with app.app_context():
        return [(r.submission_id, r.check_id, r.comment, r.closed_at is not None)
                for r in db.session.scalars(db.select(AnnotationReviewRequest))]


def test_ask_once_then_the_teacher_decides_and_every_page_agrees(app, client, auth, make_sub) -> None:
    rep = upload_report(WRONG)
    stage = stage_check(rep)
    auto, top = stage["points"], stage["max_points"]
    assert stage["evidence"].get("review") is None and auto < top
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "I think this is right" in page and page.count('class="ask-annotation') >= 1
    assert "我认为这是对的" in client.get(f"/submissions/{sid}?lang=zh_CN").get_data(as_text=True)
    before = _cell(app, "alice")

    resp = _ask(client, sid, comment="  ZeRO-3 shards the parameters; I said so  ")
    text = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "Asked the teacher on" in text and "waiting" in text
    assert _requests(app) == [(sid, STAGE, "ZeRO-3 shards the parameters; I said so", False)]
    assert _cell(app, "alice") == before  # the points stay as auto-graded until decided

    again = _ask(client, sid, comment="please")
    assert "already asked" in again.get_data(as_text=True) and len(_requests(app)) == 1
    auth.logout()

    auth.login("teacher", "teacher-pass")
    queue = client.get("/dashboard/DIST101/review/annotations?lang=en").get_data(as_text=True)
    assert "ZeRO-3 shards the parameters; I said so" in queue and "Asked by the student" in queue
    group = queue.split('class="card rgroup"')[1]
    items = [x.split('"')[0] for x in group.split('name="item" value="')[1:]]
    assert items == [f"{sid}:{STAGE}"]
    resp = client.post("/dashboard/DIST101/review/annotations/decide",
                       data={"item": items, "verdict": "full", "group": "g"})
    assert resp.status_code == 302
    with app.app_context():
        row = db.session.scalar(db.select(ManualCellScore))
        assert (row.submission_id, row.cell_id, row.score, row.max_points) == (sid, STAGE, top, top)
        audit = db.session.scalars(db.select(AuditEntry)).all()
        assert audit and audit[-1].target == f"sub:{sid}/{STAGE}" and audit[-1].old == pytest.approx(auto)
    assert _requests(app)[0][3] is True  # closed
    assert f"{sid}:{STAGE}" not in client.get("/dashboard/DIST101/review/annotations?lang=en").get_data(as_text=True)
    want = round(rep["score"] - auto + top, 2)
    assert _cell(app, "alice") == pytest.approx(want)  # replaced, not added on top of the auto points
    auth.logout()

    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "Confirmed by the teacher" in page and f'id="ask-{STAGE}"' not in page  # decided: no form, no waiting note
    assert 'value="field.train_batch_size"' in page  # the other field can still be asked about
    score = page.split('class="score-num">')[1].split("<")[0]
    assert float(score) == pytest.approx(want)


def test_asked_and_unsure_fields_are_never_one_group(app, client, auth, make_sub) -> None:
    asked = upload_report(WRONG)
    unsure = upload_report(UNSURE)
    sa = make_sub("alice", score=asked["score"], max_score=asked["max_score"], report_json=asked)
    make_sub("bob", score=unsure["score"], max_score=unsure["max_score"], report_json=unsure)
    auth.login("alice", "alice-pass")
    _ask(client, sa)
    auth.logout()
    from server.dashboard import review_annotation
    with app.app_context():
        groups = review_annotation.groups(1)
        kinds = [{p.asked for p in g.items} for g in groups]
        assert sorted(map(sorted, kinds)) == [[False], [True]]


@pytest.mark.parametrize("check_id,comment,error", [
    (STAGE, "   ", "Write a comment"),
    (STAGE, "x" * 1001, "at most 1000"),
    ("config.coverage", "it is right", "cannot be asked"),
    ("field.no.such", "it is right", "cannot be asked"),
])
def test_refused_requests_change_nothing(app, client, auth, make_sub, check_id, comment, error) -> None:
    rep = upload_report(WRONG)
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    resp = _ask(client, sid, check_id, comment)
    assert error in resp.get_data(as_text=True) and _requests(app) == []
    zh = _ask(client, sid, check_id, comment, lang="zh_CN")
    assert "请" in zh.get_data(as_text=True) or "不能" in zh.get_data(as_text=True)


def test_a_pending_field_cannot_be_asked_it_already_waits(app, client, auth, make_sub) -> None:
    rep = upload_report(UNSURE)
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    assert "cannot be asked" in _ask(client, sid).get_data(as_text=True) and _requests(app) == []


def test_another_students_submission_is_404_and_the_teacher_cannot_ask(app, client, auth, make_sub) -> None:
    rep = upload_report(WRONG)
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("bob", "bob-pass")
    assert client.post(f"/submissions/{sid}/ask", data={"check": STAGE, "comment": "mine"}).status_code in (400, 404)
    auth.logout()
    auth.login("teacher", "teacher-pass")
    assert "Only the student" in _ask(client, sid).get_data(as_text=True)
    assert _requests(app) == []


def test_without_csrf_token_nothing_is_stored(app, client, auth, make_sub) -> None:
    rep = upload_report(WRONG)
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    app.config["WTF_CSRF_ENABLED"] = True
    resp = client.post(f"/submissions/{sid}/ask", data={"check": STAGE, "comment": "right"})
    assert resp.status_code == 400 and _requests(app) == []


def test_a_decision_replaces_points_the_field_already_had(app, client, auth, make_sub) -> None:
    """The asked field had points (auto > 0): the decision is not added on top of them."""
    rep = upload_report(WRONG)
    batch = next(c for c in rep["checks"] if c["id"] == "field.train_batch_size")
    assert batch["points"] > 0
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    _ask(client, sid, "field.train_batch_size", "I explained all three factors")
    auth.logout()
    auth.login("teacher", "teacher-pass")
    queue = client.get("/dashboard/DIST101/review/annotations?lang=en").get_data(as_text=True)
    item = f"{sid}:field.train_batch_size"
    assert item in queue
    client.post("/dashboard/DIST101/review/annotations/decide", data={"item": [item], "verdict": "partial",
                                                                        "percent": "50", "group": "g"})
    want = round(rep["score"] - batch["points"] + round(batch["max_points"] / 2, 2), 2)
    assert _cell(app, "alice") == pytest.approx(want)
    exported = client.get(f"/dashboard/DIST101/submissions/{sid}/gradescope.json").get_json()
    assert exported["score"] == pytest.approx(want)  # the per-submission export says the same number
    tests = {t["name"].split(":")[0]: t for t in exported["tests"]}
    assert tests["field.train_batch_size"]["score"] == pytest.approx(round(batch["max_points"] / 2, 2))
    auth.logout()
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert float(page.split('class="score-num">')[1].split("<")[0]) == pytest.approx(want)
    assert "Confirmed by the teacher" in page
    history = client.get("/homework/DIST101/hello_ddp?lang=en").get_data(as_text=True)
    row = history.split(f'/submissions/{sid}"')[1].split("</tr>")[0]
    assert f"{want:g} / {rep['max_score']:g}" in row  # the attempt list says the same number


def _notebook_report(note: str, counted: bool = True) -> dict:
    """A notebook-route report: part C (``nb.test_annotated``, 40 points) scored from a config whose
    stage field carries ``note``, and the field checks as feedback counted inside it."""
    from coursework.report import GradeReport
    from graders.config_annotation import core, notebook

    src = config_source(note)
    spec = HOMEWORK2_SPEC()["checks"]["nb"]
    part_c = notebook._autograded_check(spec, "test_annotated", 40.0, nb_score=40.0, ran=True, problem=None,
                                        scored=notebook._static_score("annotated", src, 40.0), kernel_error=None)
    r = GradeReport(assignment="config_annotation")
    r.add(part_c)
    for c in notebook.annotation_feedback(core.annotation_checks(src), 40.0, counted=counted):
        r.add(c)
    return r.to_dict()


def HOMEWORK2_SPEC() -> dict:
    from coursework import assignments

    return assignments.load("config_annotation").raw


def test_the_notebook_route_asks_too_and_the_decision_restates_part_c(app, client, auth, make_sub) -> None:
    """Notebook-route fields are counted inside part C (``counted_in``). Asking about one works as on
    the upload route, on part C's scale: the decision replaces the field's share of part C, part C
    is restated, and the page, the attempt list and the gradebook give the same score."""
    rep = _notebook_report(WRONG)
    part_c = next(c for c in rep["checks"] if c["id"] == "nb.test_annotated")
    stage = stage_check(rep)
    counted, top = stage["evidence"]["counted_points"], stage["evidence"]["counted_max"]
    assert stage["points"] == stage["max_points"] == 0 and 0 <= counted < top < 40
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "I think this is right" in page
    assert "asked" in _ask(client, sid).get_data(as_text=True).lower() and len(_requests(app)) == 1
    auth.logout()
    auth.login("teacher", "teacher-pass")
    queue = client.get("/dashboard/DIST101/review/annotations?lang=en").get_data(as_text=True)
    assert "Asked by the student" in queue and f"{counted:g} / {top:g} points" in queue
    client.post("/dashboard/DIST101/review/annotations/decide", data={"item": [f"{sid}:{STAGE}"], "verdict": "full"})
    want = round(rep["score"] + top - counted, 2)
    assert _cell(app, "alice") == pytest.approx(want)
    auth.logout()
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert float(page.split('class="score-num">')[1].split("<")[0]) == pytest.approx(want)
    assert f"{round(part_c['points'] + top - counted, 2):g}" in page  # part C restated with the decision
    history = client.get("/homework/DIST101/hello_ddp?lang=en").get_data(as_text=True)
    assert f"{want:g} / {rep['max_score']:g}" in history.split(f'/submissions/{sid}"')[1].split("</tr>")[0]


def test_a_notebook_field_whose_part_c_counted_nothing_cannot_be_asked(app, client, auth, make_sub) -> None:
    """When the run gave part C nothing (kernel killed, format check failed), a decision could add
    points behind it: no form, and asking is refused."""
    rep = _notebook_report(WRONG, counted=False)
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    auth.login("alice", "alice-pass")
    assert "I think this is right" not in client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "cannot be asked" in _ask(client, sid).get_data(as_text=True) and _requests(app) == []


@pytest.mark.parametrize("fields", [{"status": "error"}, {"review_status": "pending"}])
def test_only_a_graded_submission_that_counts_as_graded_can_be_asked_about(app, client, auth, make_sub, fields) -> None:
    rep = upload_report(WRONG)
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep, **fields)
    auth.login("alice", "alice-pass")
    assert "I think this is right" not in client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "cannot be asked" in _ask(client, sid).get_data(as_text=True) and _requests(app) == []


def test_regraded_before_the_decision_the_decision_replaces_the_current_points(app, client, auth, make_sub) -> None:
    """A regrade between asking and deciding changed the field's automatic points: the decision
    replaces what the current report counts, on the page and in the gradebook alike."""
    from server.models import Submission

    first, regraded = upload_report(WRONG), upload_report("shards parameters, gradients and optimizer states (= FSDP full_shard)")
    assert stage_check(regraded)["points"] > stage_check(first)["points"]
    sid = make_sub("alice", score=first["score"], max_score=first["max_score"], report_json=first)
    auth.login("alice", "alice-pass")
    _ask(client, sid)
    auth.logout()
    with app.app_context():
        sub = db.session.get(Submission, sid)
        sub.report_json, sub.score = regraded, regraded["score"]
        db.session.commit()
    auth.login("teacher", "teacher-pass")
    client.post("/dashboard/DIST101/review/annotations/decide", data={"item": [f"{sid}:{STAGE}"], "verdict": "zero"})
    want = round(regraded["score"] - stage_check(regraded)["points"], 2)
    assert _cell(app, "alice") == pytest.approx(want)
    auth.logout()
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert float(page.split('class="score-num">')[1].split("<")[0]) == pytest.approx(want)


def test_a_regrade_clears_annotation_decisions_so_page_and_gradebook_agree(app, client, auth, make_sub) -> None:
    """A teacher's decision judges one reading of an annotation. A regrade replaces that reading
    (the field may no longer wait or be asked about), so the regrade clears the submission's field
    decisions and requests, audited, and the student may ask again: the gradebook never adds a
    decision the student's page cannot show."""
    from server.scores import actions
    from server.models import Submission

    first = upload_report(WRONG)
    sid = make_sub("alice", score=first["score"], max_score=first["max_score"], report_json=first)
    auth.login("alice", "alice-pass")
    _ask(client, sid)
    auth.logout()
    auth.login("teacher", "teacher-pass")
    client.post("/dashboard/DIST101/review/annotations/decide", data={"item": [f"{sid}:{STAGE}"], "verdict": "full"})
    auth.logout()
    with app.app_context():
        sub = db.session.get(Submission, sid)
        teacher = db.session.scalar(db.select(AuditEntry.actor_id).where(AuditEntry.target.like(f"sub:{sid}/field.%")))
        actions.regrade([sub], teacher, clear_decisions=True)  # the teacher ticked "clear my decisions"
        assert db.session.scalars(db.select(ManualCellScore).where(ManualCellScore.submission_id == sid)).all() == []
        assert db.session.scalars(db.select(AnnotationReviewRequest)).all() == []
        assert db.session.scalar(db.select(AuditEntry).where(AuditEntry.target == f"sub:{sid}/{STAGE}",
                                                             AuditEntry.reason.like("regrade%")))
        regraded = upload_report(UNSURE)  # the new reading is unsure: the field waits for the teacher again
        sub.status, sub.report_json, sub.score = "graded", regraded, regraded["score"]
        db.session.commit()
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert float(page.split('class="score-num">')[1].split("<")[0]) == pytest.approx(_cell(app, "alice"))
    assert _cell(app, "alice") == pytest.approx(regraded["score"])
