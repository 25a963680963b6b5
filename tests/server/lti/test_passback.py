"""AGS grade passback against the test platform over real HTTP: the counted score (the gradebook's
number) goes to one line item per homework, created once and reused, through the real RQ queue
(a SimpleWorker on the test's redis-server); sending again is idempotent; a changed grade (an
override) is sent again; a held-back item sends nothing until published; an LMS outage is stored
as a failure the instructor sees, and the retry sends it."""
from __future__ import annotations

import pytest
import requests
from rq import Queue, SimpleWorker

from coursework.assignments import all_assignments
from server.scores import actions
from server.extensions import db
from server.grading.queue import redis_conn
from server.homework.points import item_total
from server.lti import passback
from server.lti.models import LtiContext, LtiUser
from server.models import Course, Submission, User
from tests.server.lti.test_launch import STUDENT, TEACHER, _create_course, launch, platform  # noqa: F401


class _Worker(SimpleWorker):
    """RQ's worker in this process, without its pubsub listener (commands to kill a job): stopping
    that thread waits out redis-py's poll, ~20 s per burst."""

    def subscribe(self) -> None:
        pass


def _drain(app) -> None:
    """Run every queued passback job in this process (the worker's queue, real Redis)."""
    with app.app_context():
        _Worker([Queue(passback.QUEUE, connection=redis_conn())], connection=redis_conn()).work(burst=True)


@pytest.fixture
def lms_course(app, client, platform):  # noqa: F811
    """A course created from the platform by its teacher, a student who launched it once, and the
    tool's public key given to the platform; returns (course id, student id, homework id, max)."""
    first, _ = launch(client, platform, TEACHER)
    _create_course(client, first.get_data(as_text=True))
    launch(app.test_client(), platform, STUDENT)
    platform.tool_jwks = client.get("/lti/jwks.json").get_json()
    hw = all_assignments()[0]
    with app.app_context():
        course = db.session.scalar(db.select(Course).where(Course.code == "DDP101"))
        student = db.session.scalar(db.select(User.id).join(LtiUser).where(LtiUser.sub == STUDENT["sub"]))
        top = item_total("hw", hw.id)
        db.session.add(Submission(user_id=student, course_id=course.id, assignment_id=hw.id, status="graded",
                                  filename="train.py", content=b"x", sha256=Submission.digest(b"x"), size=1,
                                  score=round(top * 0.6, 2), max_score=top))
        db.session.commit()
        return course.id, student, hw.id


def _sent(platform) -> dict:  # noqa: F811
    return {u: s["scoreGiven"] for line in platform.scores.values() for u, s in line.items()}


def test_counted_score_reaches_the_line_item_once_and_follows_changes(app, platform, lms_course) -> None:  # noqa: F811
    course_id, student, hw = lms_course
    item = f"hw:{hw}"
    with app.app_context():
        assert passback.grade_changed(course_id, student, item) == 1
        score, top, _ = passback.counted(db.session.get(Course, course_id), student, item)
    _drain(app)
    assert _sent(platform) == {"s-7": score} and len(platform.lineitems) == 1
    line = next(iter(platform.lineitems.values()))
    assert line["tag"] == item and line["scoreMaximum"] == top
    # read back through the platform's results service (the tool's own AGS client, real HTTP)
    with app.app_context():
        ctx = db.session.scalar(db.select(LtiContext))
        results = passback._service(ctx).get_grades(__import__("pylti1p3.lineitem", fromlist=["LineItem"])
                                                    .LineItem({"id": line["id"]}))
    assert results == [{"userId": "s-7", "resultScore": score, "resultMaximum": top}]

    with app.app_context():  # the same grade again: nothing new is posted
        passback.grade_changed(course_id, student, item)
    posted = dict(platform.scores)
    _drain(app)
    assert platform.scores == posted and len(platform.lineitems) == 1

    with app.app_context():  # an override changes the counted score: sent again, same line item
        teacher = db.session.scalar(db.select(User.id).join(LtiUser).where(LtiUser.sub == TEACHER["sub"]))
        actions.set_override(course_id, student, item, top, "oral exam", teacher, score, top)
    _drain(app)
    assert _sent(platform) == {"s-7": top} and len(platform.lineitems) == 1


def test_an_lms_outage_is_shown_and_retried(app, client, platform, lms_course) -> None:  # noqa: F811
    course_id, student, hw = lms_course
    platform.fail_scores = 10  # more than RQ's retries
    with app.app_context():
        passback.grade_changed(course_id, student, f"hw:{hw}")
    _drain(app)
    with app.app_context():
        failed = passback.failures(course_id)
        assert len(failed) == 1 and "503" in failed[0].error and failed[0].tries >= 2
    page = client.get("/lti/DDP101/passback?lang=en").get_data(as_text=True)
    assert "503" in page and "Retry" in page
    platform.fail_scores = 0
    client.post("/lti/DDP101/passback", data={"action": "retry"})
    _drain(app)
    assert "s-7" in _sent(platform)
    with app.app_context():
        assert passback.failures(course_id) == []


def test_held_back_scores_wait_for_publication(app, client, platform, lms_course) -> None:  # noqa: F811
    course_id, student, hw = lms_course
    client.post(f"/dashboard/DDP101/homework/{hw}/release", data={"action": "mode", "mode": "manual"})
    with app.app_context():
        passback.grade_changed(course_id, student, f"hw:{hw}")
    _drain(app)
    assert _sent(platform) == {}
    client.post(f"/dashboard/DDP101/homework/{hw}/release", data={"action": "publish"})  # queues the passback
    _drain(app)
    assert "s-7" in _sent(platform)


def test_roster_sync_enrols_the_lms_members(app, client, platform, lms_course) -> None:  # noqa: F811
    course_id, _, _ = lms_course
    role = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
    platform.members = [  # an LMS roster lists the teacher too (staff missing from it lose the role)
        {"user_id": "t-1", "name": "Prof. Wang", "roles": [role + "Instructor"], "status": "Active"},
        {"user_id": "s-8", "name": "Han Meimei", "email": "han@example.edu", "roles": [role + "Learner"], "status": "Active"},
        {"user_id": "ta-1", "name": "TA Zhao", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"], "status": "Active"},
        {"user_id": "s-9", "name": "Gone", "roles": [role + "Learner"], "status": "Inactive"},
        {"user_id": "s-7", "name": "Li Lei", "roles": [role + "Learner"], "status": "Active"}]  # launched already
    page = client.post("/lti/DDP101/passback?lang=en", data={"action": "roster"}, follow_redirects=True)
    assert "Roster synced: 2 students and 2 instructors." in page.get_data(as_text=True), page.get_data(as_text=True)[-2500:]
    with app.app_context():
        by_sub = {sub: db.session.get(User, uid) for sub, uid in db.session.execute(db.select(LtiUser.sub, LtiUser.user_id))}
        assert set(by_sub) == {"t-1", "s-7", "s-8", "ta-1"}  # no second account for s-7, none for the inactive one
        assert by_sub["s-8"].role_in(course_id).value == "student" and by_sub["s-8"].display_name == "Han Meimei"
        assert by_sub["ta-1"].role_in(course_id).value == "instructor"


def test_deep_linking_places_a_homework_whose_line_item_passback_reuses(app, client, platform, lms_course) -> None:  # noqa: F811
    course_id, student, hw = lms_course
    platform.next_deep_link = True
    resp, _ = launch(client, platform, TEACHER)
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/lti/DDP101/deep-link")
    page = client.get("/lti/DDP101/deep-link?lang=en").get_data(as_text=True)
    assert f'value="hw:{hw}"' in page
    assert client.post("/lti/DDP101/deep-link", data={}).status_code == 400  # nothing chosen: nothing sent
    form = client.post("/lti/DDP101/deep-link", data={"item": f"hw:{hw}"}).get_data(as_text=True)
    action = form.split('action="')[1].split('"')[0]
    jwt_value = form.split('name="JWT" value="')[1].split('"')[0]
    assert action == platform.url + "/deeplink/return"
    assert requests.post(action, data={"JWT": jwt_value}, timeout=10).json() == {"placed": 1}  # the browser's post
    placed = platform.placed[0]
    assert placed["custom"] == {"item": f"hw:{hw}"} and placed["url"].endswith("/lti/launch")
    assert len(platform.lineitems) == 1
    with app.app_context():
        passback.grade_changed(course_id, student, f"hw:{hw}")
    _drain(app)
    assert len(platform.lineitems) == 1 and "s-7" in _sent(platform)  # the placed line item got the score


def test_a_finished_quiz_reaches_its_own_line_item(app, platform, lms_course) -> None:  # noqa: F811
    from tests.server.quiz.trust_helpers import earn_trust

    with app.app_context():  # the free-text verdict counts at once (not provisional) once trust is earned
        earn_trust("ch7_3/selftest_1")
    student = app.test_client()
    launch(student, platform, STUDENT)  # signed in from the LMS
    start = student.post("/quiz/ch7_3_graded/start")
    attempt = int(start.headers["Location"].rstrip("/").split("/")[-1])
    student.post(f"/quiz/attempt/{attempt}/answer/0", data={"answer": "数据并行解决吞吐，模型并行解决容量"},
                 headers={"Accept": "application/json"})
    student.post(f"/quiz/attempt/{attempt}/finish")
    _drain(app)
    tags = {line["tag"]: url for url, line in platform.lineitems.items()}
    assert "quiz:ch7_3_graded" in tags
    assert platform.scores[tags["quiz:ch7_3_graded"]]["s-7"]["scoreGiven"] > 0
