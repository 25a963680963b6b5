"""The gradebook and its exports tell one story (issue: gradebook vs exports).

An unpublished homework showed its scores in the gradebook with no marker while both CSVs left
them empty; free-text answers waiting in an attempt that is not the counted one (not the best)
showed nowhere, in the cell or the CSV, although a teacher's confirmation could make it count.
"""
from __future__ import annotations

import csv
import io

import pytest

from server.extensions import db
from server.models import User
from tests.server.conftest import PLACEHOLDER


def _attempt(app, username: str, attempt_no: int, answers: list[tuple[str, float, str | None]]) -> None:
    from server.quiz.models import QuizAnswer, QuizAttempt

    with app.app_context():
        uid = db.session.scalar(db.select(User.id).where(User.username == username))
        att = QuizAttempt(user_id=uid, course_id=1, quiz_id="ch7_3_graded", attempt_no=attempt_no, mode="graded",
                          status="submitted", question_ids=[a[0] for a in answers],
                          score=sum(a[1] for a in answers), max_score=10.0)
        db.session.add(att)
        db.session.flush()
        for pos, (qid, score, state) in enumerate(answers):
            db.session.add(QuizAnswer(attempt_id=att.id, user_id=uid, quiz_id="ch7_3_graded", question_id=qid,
                                      position=pos, seed=1, raw_answer="x", score=score, max_score=1.0,
                                      fraction=score, correct=score == 1.0, details_json={}, feedback_json=[],
                                      review_state=state, auto_score=1.0 if state else None))
        db.session.commit()


@pytest.mark.parametrize("lang", ["zh_CN", "en"])
def test_unreleased_and_waiting_elsewhere_are_marked_as_the_exports_have_them(app, client, auth, make_sub, lang):
    make_sub("alice", score=7.0)
    _attempt(app, "alice", 1, [("ch7_3/selftest_1", 1.0, None), ("ch7_3/selftest_2", 1.0, None)])  # best: 2
    _attempt(app, "alice", 2, [("ch7_3/selftest_1", 1.0, None), ("ch7_3/selftest_2", 0.0, "pending")])  # waits
    auth.login("teacher", "teacher-pass")
    client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/release", data={"action": "mode", "mode": "manual"})
    page = client.get(f"/dashboard/DIST101/?lang={lang}").get_data(as_text=True)
    canvas = client.get("/dashboard/DIST101/export/canvas.csv").get_data(as_text=True)
    rows = list(csv.reader(io.StringIO(canvas.lstrip("\ufeff"))))
    alice = next(r for r in rows if "alice" in r)
    hw_col = next(i for i, h in enumerate(rows[0]) if PLACEHOLDER in h or "Hello" in h or "hello" in h.lower())
    assert alice[hw_col] == ""  # the export leaves the unreleased homework empty ...
    held = {"zh_CN": "未公布", "en": "not released"}[lang]
    head = page.split("<thead>")[1].split("</thead>")[0]
    assert held in head, head  # ... and the gradebook says so where it shows the score
    assert alice[-1].startswith("1"), (rows[0], alice)  # the waiting answer of attempt 2 is in the CSV
    elsewhere = {"zh_CN": "另一次作答", "en": "another attempt"}[lang]
    assert elsewhere in page.split("<tbody>")[1]


def test_the_exports_say_their_charset_once(client, auth, hw):
    """``Content-Type: text/csv; charset=utf-8; charset=utf-8`` (the view added what Flask adds)."""
    auth.login("teacher", "teacher-pass")
    for kind in ("canvas", "moodle"):
        ctype = client.get(f"/dashboard/DIST101/export/{kind}.csv").headers["Content-Type"]
        assert ctype.count("charset") == 1, ctype


@pytest.mark.parametrize("path", ["assignments/ddp_speedup/assignment.json", "assignments/fsdp_fit/assignment.json",
                                  "quizzes/ch7_3/memory/full_training/info.json",
                                  "quizzes/ch7_3/memory/zero_per_card/info.json",
                                  "quizzes/ch7_3/comm/allreduce_time/info.json"])
def test_english_with_a_number_in_it_reads_for_every_number(path):
    """"All 2 processes finished", "a 8B-parameter model": English that breaks for some numbers."""
    from tests.conftest import REPO

    text = (REPO / path).read_text()
    assert "All {n} processes" not in text and "{billions}B-parameter" not in text


@pytest.mark.parametrize("lang, said", [("en", "new numbers every time"), ("zh_CN", "每次题目数字都会变化")])
def test_a_practice_quiz_of_fixed_questions_does_not_promise_new_numbers(client, auth, lang, said):
    """The self-test (six fixed-text questions) said "new numbers every time"; the practice bank,
    whose questions are generated, still says so."""
    auth.login("alice", "alice-pass")
    assert said not in client.get(f"/quiz/ch7_3_selftest/?lang={lang}").get_data(as_text=True)
    assert said in client.get(f"/quiz/ch7_3_practice/?lang={lang}").get_data(as_text=True)
