"""Every change to a counted score sends ``server.scores.events.score_changed`` (LTI passback subscribes).

``SCORE_PATHS`` is the list of every function that changes a counted score; each must send the event
(read from its source with ``ast``), and the ones callable without a page are run here against a real
database with a recorder subscribed. A new place that changes a score belongs in the list."""
from __future__ import annotations

import ast
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from server.extensions import db
from server.lti import passback
from server.models import Course, CourseAssignment, User
from server.scores import actions, events, release

ROOT = Path(__file__).resolve().parents[2]
SENDERS = {"changed", "changed_submissions", "changed_attempts"}
SCORE_PATHS = {  # module file -> functions that change a counted score
    "server/grading/task.py": ["_grade_submission"],  # a grading lands
    "server/scores/actions.py": ["set_override", "clear_override", "set_cell_score", "set_extension",
                                 "update_settings"],
    "server/scores/regrade_requests.py": ["answer_with_score"],
    "server/scores/release.py": ["publish"],  # held results start to count
    "server/dashboard/integrity.py": ["decide"],
    "server/dashboard/trust_views.py": ["set_count_unconfirmed"],  # counting unconfirmed verdicts on or off
    "server/dashboard/review_annotation.py": ["decide"],  # annotations decided as a group or one asked about
    "server/quiz/review.py": ["decide"],
    "server/quiz/attempts.py": ["finish_attempt"],  # an attempt ends: finished, or expired by its time window
}


def _functions(path: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _sends(fn: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SENDERS
               and isinstance(n.func.value, ast.Name) and n.func.value.id in ("events", "score_events")
               for n in ast.walk(fn))


@pytest.mark.parametrize("path", sorted(SCORE_PATHS))
def test_every_path_that_changes_a_score_sends_the_event(path: str) -> None:
    found = _functions(path)
    for name in SCORE_PATHS[path]:
        assert name in found, f"{path}: no function {name} (renamed? update SCORE_PATHS)"
        assert _sends(found[name]), f"{path}:{name} changes a counted score without events.changed"


def test_nothing_calls_passback_by_hand_outside_the_lti_package() -> None:
    """The LMS hears of a change through the event only; the LTI pages' own "send again" may call it."""
    for path in (ROOT / "server").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("server/lti/") or rel == "server/__init__.py":
            continue
        assert "passback.notify" not in path.read_text(encoding="utf-8"), rel


@pytest.fixture
def recorded(app):
    got: list[tuple[int, int | None, str | None]] = []

    def record(course_id, user_id=None, item=None):
        got.append((course_id, user_id, item))

    events.score_changed.connect(record)
    yield got
    events.score_changed.disconnect(record)


def _course_student_homework(app):
    course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
    student = db.session.scalar(db.select(User).where(User.username == "alice"))
    teacher = db.session.scalar(db.select(User).where(User.username == "teacher"))
    ca = db.session.scalar(db.select(CourseAssignment).where(CourseAssignment.course_id == course.id))
    return course, student, teacher, ca


def test_the_lms_subscribes(app) -> None:
    assert passback.notify in list(events.score_changed.receivers_for(1))


def test_overrides_extensions_and_settings_send_it(app, recorded) -> None:
    with app.app_context():
        course, student, teacher, ca = _course_student_homework(app)
        item = f"hw:{ca.assignment_id}"
        actions.set_override(course.id, student.id, item, 5, "checked by hand", teacher.id, computed=3.0)
        actions.clear_override(course.id, student.id, item, "undo", teacher.id, computed=3.0)
        assert recorded == [(course.id, student.id, item)] * 2
        # a later deadline can lift a late penalty: the counted score moves
        actions.set_extension(ca, student.id, datetime.now() + timedelta(days=3), "ill", teacher.id)
        assert recorded[-1] == (course.id, student.id, item)
        # a new late penalty or score policy moves every student's score on the homework
        actions.update_settings(ca, deadline=ca.deadline, attempt_limit=ca.attempt_limit,
                                late_penalty_per_day=0.2, score_policy="last")
        assert recorded[-1] == (course.id, None, item)
        release.set_mode(course.id, item, "manual", teacher.id)
        release.publish(course.id, item, teacher.id)
        assert recorded[-1] == (course.id, None, item)


def test_a_failing_subscriber_never_undoes_the_change(app, recorded) -> None:
    def broken(course_id, user_id=None, item=None):
        raise RuntimeError("an LMS cache that broke")

    events.score_changed.connect(broken)
    try:
        with app.app_context():
            course, student, teacher, ca = _course_student_homework(app)
            actions.set_override(course.id, student.id, f"hw:{ca.assignment_id}", 4, "ok", teacher.id, computed=3.0)
            assert recorded  # the others still heard it
    finally:
        events.score_changed.disconnect(broken)
