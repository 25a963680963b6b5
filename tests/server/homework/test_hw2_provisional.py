"""Homework 2 counts no annotation above what a teacher confirmed, unless the field's
reading earned trust or the course chose to count unconfirmed verdicts; either way every page and
export says which points wait or are unconfirmed.

The note under test is right and the reading is sure of it, but no teacher has decided a single note
of these fields yet: both fields are provisional (``review_reason: untrusted``)."""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest

from server.scores.gradebook import build_gradebook
from server.scores.hand_scores import submission_scores
from server.extensions import db
from server.models import Course
from tests.fixtures.annotation_reports import STAGE, upload_report

HOMEWORK2 = Path(__file__).resolve().parents[3] / "assignments" / "config_annotation"
RIGHT = "shards parameters, gradients and optimizer states (= FSDP full_shard)"
BATCH = "field.train_batch_size"


@pytest.fixture(autouse=True)
def _homework2_published(hw, monkeypatch) -> None:
    from graders.config_annotation import core

    monkeypatch.delenv(core.TRUSTED_ENV, raising=False)  # the shipped default: no field earned trust yet
    (Path(os.environ["DISTGRADE_ASSIGNMENTS_DIR"]) / "config_annotation").symlink_to(HOMEWORK2)


def _cell(app):
    with app.app_context():
        book = build_gradebook(db.session.scalar(db.select(Course)))
        row = next(r for r in book.rows if r.username == "alice")
        return row.cells[book.item("hw:hello_ddp").key]


def _held(rep: dict) -> dict[str, float]:
    return {c["id"]: c["evidence"]["provisional_points"] for c in rep["checks"]
            if (c.get("evidence") or {}).get("review") == "pending"}


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))


def test_unconfirmed_notes_count_nothing_until_confirmed_or_the_course_counts_them(app, client, auth, make_sub):
    rep = upload_report(RIGHT)
    held = _held(rep)
    assert set(held) == {STAGE, BATCH} and all(v > 0 for v in held.values())
    assert sum(c["points"] for c in rep["checks"] if c["id"].startswith("field.")) == 0
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)

    # nothing confirmed, the course counts only confirmed verdicts: 0 more, two notes marked waiting
    cell = _cell(app)
    assert cell.score == pytest.approx(rep["score"]) and (cell.waiting, cell.unconfirmed) == (2, 0.0)
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "2 annotations wait for a teacher: their points count once a teacher confirms them." in page
    assert "2 条注释在等待老师确认" in client.get(f"/submissions/{sid}?lang=zh_CN").get_data(as_text=True)
    auth.logout()

    # the course counts unconfirmed verdicts: the suggestions count, marked unconfirmed everywhere
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    token = page.split('name="csrf_token" value="')[1].split('"')[0]
    assert client.post("/dashboard/DIST101/settings/unconfirmed",
                       data={"count": "1", "csrf_token": token}).status_code == 302
    suggested = round(sum(held.values()), 4)
    cell = _cell(app)
    assert cell.score == pytest.approx(rep["score"] + suggested)
    assert (cell.waiting, cell.unconfirmed) == (2, pytest.approx(suggested))
    with app.app_context():
        got = submission_scores([sid])[sid]
    assert got.counted == pytest.approx(cell.score) and got.unconfirmed == pytest.approx(suggested)
    canvas = _csv(client.get("/dashboard/DIST101/export/canvas.csv").get_data(as_text=True))
    col = next(i for i, h in enumerate(canvas[0]) if h.endswith("[hw:hello_ddp]"))
    alice = next(r for r in canvas if r[2] == "alice")
    assert float(alice[col]) == pytest.approx(cell.score) and alice[-1] == f"2 ({suggested:g})"
    gradescope = client.get(f"/dashboard/DIST101/submissions/{sid}/gradescope.json").get_json(force=True)
    assert gradescope["score"] == pytest.approx(cell.score)
    auth.logout()
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert float(page.split('class="score-num">')[1].split("<")[0]) == pytest.approx(cell.score)
    assert f"2 annotations wait for a teacher; {suggested:g} of these points count already but are unconfirmed." in page
    auth.logout()

    # a teacher confirms one note with full marks: it counts as decided, the other stays unconfirmed
    auth.login("teacher", "teacher-pass")
    stage = next(c for c in rep["checks"] if c["id"] == STAGE)
    assert client.post("/dashboard/DIST101/review/annotations/decide",
                       data={"item": [f"{sid}:{STAGE}"], "verdict": "full", "group": "u"}).status_code == 302
    cell = _cell(app)
    assert (cell.waiting, cell.unconfirmed) == (1, pytest.approx(held[BATCH]))
    assert cell.score == pytest.approx(rep["score"] + stage["max_points"] + held[BATCH])

    # and back to counting only confirmed verdicts: the decided note stays, the other waits again
    page = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    token = page.split('name="csrf_token" value="')[1].split('"')[0]
    client.post("/dashboard/DIST101/settings/unconfirmed", data={"count": "0", "csrf_token": token})
    cell = _cell(app)
    assert cell.score == pytest.approx(rep["score"] + stage["max_points"]) and (cell.waiting, cell.unconfirmed) == (1, 0.0)


def test_a_held_note_is_waiting_not_a_failed_check_in_the_homework_statistics(app, make_sub):
    from server.dashboard import stats

    rep = upload_report(RIGHT)
    make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    with app.app_context():
        course = db.session.scalar(db.select(Course))
        hs = stats.homework_stats(course.id, "hello_ddp")
    assert {c.check_id: len(c.failing) for c in hs.checks}.get(STAGE) == 0


def test_the_notebook_routes_waiting_fields_become_rows_with_their_suggestion(app, make_sub):
    """Part C (``nb.test_annotated``) keeps the waiting fields on its own scale: each one's row holds
    the reading's suggestion on that scale, and no more than a teacher could give."""
    from server.scores.models import ProvisionalField
    from tests.graders.test_config_annotation_waiting import _part_c, _reference_config

    c = _part_c(_reference_config()).to_dict()
    assert c["evidence"]["waiting"] and set(c["evidence"]["provisional"]) == set(c["evidence"]["waiting"])
    rep = {"assignment": "config_annotation", "score": c["points"], "max_score": c["max_points"], "checks": [c]}
    sid = make_sub("alice", score=rep["score"], max_score=rep["max_score"], report_json=rep)
    with app.app_context():
        rows = {r.check_id: r.provisional for r in db.session.scalars(
            db.select(ProvisionalField).where(ProvisionalField.submission_id == sid))}
    assert rows == pytest.approx(c["evidence"]["provisional"])
    assert all(0 < rows[k] <= c["evidence"]["waiting"][k] + 0.01 for k in rows)
    assert c["points"] + sum(rows.values()) <= c["max_points"] + 0.05
