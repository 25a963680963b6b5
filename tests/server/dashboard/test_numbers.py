"""The numbers people see agree everywhere: maxima from the item's definition (before anyone
submits), one total (practice left out, every homework in, "-" for a student with nothing), the
instructor's override shown to the student with its reason, overrides above the maximum refused,
and homework statistics that follow the course's best/last policy like the gradebook."""
from __future__ import annotations

import copy
import csv
import html
import io
import json
import re

import pytest

from server.scores.gradebook import build_gradebook
from server.extensions import db
from server.models import Course, CourseAssignment, User
from tests.conftest import REPO
from tests.server.conftest import PLACEHOLDER, SAMPLE_REPORT

TEACHER = ("teacher", "teacher-pass")


def _text(resp) -> str:
    """The page as a reader sees it: tags dropped, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", resp.get_data(as_text=True))).split())


def _quiz_points(quiz_id: str) -> float:
    """Independent of the code under test: the sum of the questions' ``points`` in info.json."""
    quiz = json.loads((REPO / "quizzes" / f"{quiz_id}.json").read_text())
    return sum(json.loads((REPO / "quizzes" / q / "info.json").read_text()).get("points", 1)
               for q in quiz["questions"])


def _uid(name: str) -> int:
    return db.session.scalar(db.select(User.id).where(User.username == name))


def _course() -> Course:
    return db.session.scalar(db.select(Course).where(Course.code == "DIST101"))


def _practice_attempt(username: str, quiz_id: str = "ch7_3_selftest", score: float = 3.75) -> None:
    from server.quiz.models import QuizAttempt

    db.session.add(QuizAttempt(user_id=_uid(username), course_id=1, quiz_id=quiz_id, attempt_no=1, mode="practice",
                               status="submitted", question_ids=[], score=score, max_score=6.0))
    db.session.commit()


def test_maxima_come_from_assignment_json_and_the_quiz_before_anyone_submits(app):
    graded = _quiz_points("ch7_3_graded")
    with app.app_context():
        _practice_attempt("alice")  # a practice quiz someone took shows up, but never counts
        book = build_gradebook(_course())
        maxima = {i.key: i.max_score for i in book.items}
        assert maxima["hw:ddp_speedup"] == maxima["hw:fsdp_fit"] == maxima["hw:config_annotation"] == 100
        assert maxima["quiz:ch7_3_graded"] == graded > 0
        assert maxima["quiz:ch7_3_selftest"] > 0 and not book.item("quiz:ch7_3_selftest").counted
        assert book.total_max == 300 + graded
        # homework in its numbered order (1, 2, 3), not by folder name
        assert [i.ref for i in book.items if i.kind == "hw"] == ["ddp_speedup", "config_annotation", "fsdp_fit"]
        rows = {r.username: r for r in book.rows}
        assert rows["bob"].total is None  # nothing counted yet: "-", not 0
        assert rows["alice"].total is None  # the practice self-test is not part of the total


def test_canvas_and_moodle_exports_carry_the_real_maxima_and_no_practice(app, client, auth):
    graded = _quiz_points("ch7_3_graded")
    with app.app_context():
        _practice_attempt("alice")
    auth.login(*TEACHER)
    body = client.get("/dashboard/DIST101/export/canvas.csv").get_data(as_text=True).lstrip("\ufeff")
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[1][0] == "Points Possible"
    assert [float(x) for x in rows[1][5:]] == [100, 100, 100, graded]
    assert not any("selftest" in h or "practice" in h for h in rows[0])
    moodle = list(csv.reader(io.StringIO(client.get("/dashboard/DIST101/export/moodle.csv")
                                         .get_data(as_text=True).lstrip("\ufeff"))))
    assert len(moodle[0]) == 3 + 4 and not any("selftest" in h for h in moodle[0])
    assert any("/ 100" in h or "(100)" in h for h in moodle[0])  # the maximum is in each column header


def test_gradebook_page_shows_maxima_totals_and_a_dash_for_nothing(app, client, auth):
    graded = _quiz_points("ch7_3_graded")
    with app.app_context():
        _practice_attempt("alice")
    auth.login(*TEACHER)
    page = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    assert "of 0" not in page and f"of {300 + graded:g}" in page
    assert "practice, not counted" in page
    student = client.get("/dashboard/DIST101/students/bob?lang=en").get_data(as_text=True)
    assert f"Total – / {300 + graded:g}" in " ".join(student.split())


@pytest.fixture
def placeholder_total(hw):
    """Give the placeholder homework a declared total of 10 points."""
    from coursework import settings

    path = settings.assignments_dir() / PLACEHOLDER / "assignment.json"
    meta = json.loads(path.read_text())
    meta["total_points"] = 10
    path.write_text(json.dumps(meta))
    return hw


def _override(client, username: str, score, reason: str):
    return client.post(f"/dashboard/DIST101/students/{username}/override?lang=en",
                       data={"item": f"hw:{PLACEHOLDER}", "score": score, "reason": reason, "action": "set"},
                       follow_redirects=True)


def test_an_override_reaches_the_student_with_its_reason(app, client, auth, make_sub, placeholder_total):
    sid = make_sub("alice", score=10.0, max_score=10.0)
    auth.login(*TEACHER)
    _override(client, "alice", "8.5", "copied the sampler from a classmate")
    auth.logout()
    auth.login("alice", "alice-pass")
    for url in ("/homework/", f"/homework/DIST101/{PLACEHOLDER}", f"/submissions/{sid}"):
        text = _text(client.get(f"{url}?lang=en")).replace(" / ", "/")
        assert "Counted: 8.5/10" in text, url
        assert "changed by the teacher: copied the sampler from a classmate" in text, url
        assert "Best score: 10/10" not in text, url
    zh = _text(client.get("/homework/?lang=zh_CN")).replace(" / ", "/")
    assert "计分: 8.5/10" in zh and "老师修改：copied the sampler from a classmate" in zh


def test_an_override_above_the_maximum_is_refused_with_the_maximum(app, client, auth, make_sub, placeholder_total):
    from server.scores.models import ScoreOverride

    make_sub("alice", score=10.0, max_score=10.0)
    auth.login(*TEACHER)
    page = " ".join(_override(client, "alice", "15", "bonus").get_data(as_text=True).split())
    assert "between 0 and 10" in page
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count(ScoreOverride.id))) == 0
    _override(client, "alice", "10", "full marks after the fix")
    with app.app_context():
        assert db.session.scalar(db.select(ScoreOverride.score)) == 10.0


def _report(score: float, syntax_error: bool = False) -> dict:
    report = copy.deepcopy(SAMPLE_REPORT)
    report["score"] = score
    if syntax_error:
        for c in report["checks"]:
            c["status"] = "fail"
    return report


def test_homework_statistics_follow_the_policy_like_the_gradebook(app, client, auth, make_sub, placeholder_total):
    from server.dashboard import stats

    make_sub("alice", score=8.5, report_json=_report(8.5))
    last = make_sub("alice", score=0.0, report_json=_report(0.0, syntax_error=True))  # last upload: a syntax error
    with app.app_context():
        hs = stats.homework_stats(1, PLACEHOLDER)
        assert hs.policy == "best"
        assert hs.scores == [pytest.approx(0.85)]  # the gradebook's 8.5 / 10, not the last upload's 0
        assert all(last not in c.failing for c in hs.checks)
        ca = db.session.scalar(db.select(CourseAssignment).where(CourseAssignment.assignment_id == PLACEHOLDER))
        ca.score_policy = "last"
        db.session.commit()
        hs = stats.homework_stats(1, PLACEHOLDER)
        assert hs.policy == "last" and hs.scores == [0.0]
        assert any(last in c.failing for c in hs.checks)
    auth.login(*TEACHER)
    page = _text(client.get(f"/dashboard/DIST101/homework/{PLACEHOLDER}?lang=en"))
    assert "each student's last graded submission (the course's policy" in page
