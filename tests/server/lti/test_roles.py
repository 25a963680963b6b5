"""Course roles follow the platform, on every launch and every roster sync, down as well as up,
each change written to the role audit; mentors/observers and institution-only roles get no course
membership (no student row, nothing in the gradebook) and a page that says why; the id_token's
times are judged with a small clock-skew leeway."""
from __future__ import annotations

import time

import pytest

from server.extensions import db
from server.lti.models import LtiRoleChange, LtiUser
from server.models import Course, Membership, User
from tests.server.lti.platform import ROLE
from tests.server.lti.test_launch import TEACHER, _auth_request, _create_course, _login, launch, platform  # noqa: F401

ASSISTANT = {"sub": "ta-1", "name": "TA Zhao", "role": "Instructor"}
MENTOR = {"sub": "m-1", "name": "Parent Li", "role": "Mentor"}
ADMIN = {"sub": "a-1", "name": "Dean", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator"]}


@pytest.fixture
def course(app, client, platform):  # noqa: F811
    first, _ = launch(client, platform, TEACHER)
    _create_course(client, first.get_data(as_text=True))
    platform.tool_jwks = client.get("/lti/jwks.json").get_json()
    with app.app_context():
        return db.session.scalar(db.select(Course.id).where(Course.code == "DDP101"))


def _role(app, course_id: int, sub: str) -> str | None:
    with app.app_context():
        user = db.session.scalar(db.select(User).join(LtiUser).where(LtiUser.sub == sub))
        role = user.role_in(course_id) if user else None
        return role.value if role else None


def _changes(app, sub: str) -> list[tuple]:
    with app.app_context():
        uid = db.session.scalar(db.select(LtiUser.user_id).where(LtiUser.sub == sub))
        return [(c.old, c.new, c.source) for c in db.session.scalars(
            db.select(LtiRoleChange).where(LtiRoleChange.user_id == uid).order_by(LtiRoleChange.id))]


def test_a_launch_sets_the_role_down_as_well_as_up(app, platform, course) -> None:  # noqa: F811
    launch(app.test_client(), platform, ASSISTANT)
    assert _role(app, course, "ta-1") == "instructor"
    resp, _ = launch(app.test_client(), platform, {**ASSISTANT, "role": "Learner"})
    assert resp.status_code == 302 and _role(app, course, "ta-1") == "student"
    launch(app.test_client(), platform, ASSISTANT)
    assert _role(app, course, "ta-1") == "instructor"
    assert _changes(app, "ta-1") == [(None, "instructor", "launch"), ("instructor", "student", "launch"),
                                     ("student", "instructor", "launch")]
    launch(app.test_client(), platform, ASSISTANT)  # the same role again: nothing to audit
    assert len(_changes(app, "ta-1")) == 3


def test_a_roster_sync_demotes_and_removes_staff(app, client, platform, course) -> None:  # noqa: F811
    from server.lti import roster

    launch(app.test_client(), platform, ASSISTANT)
    launch(app.test_client(), platform, {"sub": "ta-2", "name": "TA Qian", "role": "Instructor"})
    launch(app.test_client(), platform, {"sub": "s-1", "name": "Stu", "role": "Learner"})
    platform.members = [
        {"user_id": "t-1", "roles": [ROLE + "Instructor"], "status": "Active"},
        {"user_id": "ta-1", "roles": [ROLE + "Learner"], "status": "Active"},  # now a student
        {"user_id": "s-1", "roles": [ROLE + "Learner"], "status": "Active"}]  # ta-2 is gone from the course
    with app.app_context():
        counts = roster.sync(course)
    assert counts["student"] == 2 and counts["instructor"] == 1 and counts["removed"] == 1
    assert _role(app, course, "ta-1") == "student" and _role(app, course, "ta-2") is None
    assert _role(app, course, "t-1") == "instructor" and _role(app, course, "s-1") == "student"
    assert _changes(app, "ta-1")[-1] == ("instructor", "student", "roster")
    assert _changes(app, "ta-2")[-1] == ("instructor", None, "roster")
    page = client.get("/lti/DDP101/passback?lang=en").get_data(as_text=True)
    assert "Role changes" in page and "TA Qian" in page


def test_mentors_and_observers_get_no_course_row(app, client, platform, course) -> None:  # noqa: F811
    from server.scores.gradebook import build_gradebook
    from server.lti import roster

    mentor = app.test_client()
    resp, _ = launch(mentor, platform, MENTOR)
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "observer" in page.lower() and "LMS" in page
    assert mentor.get("/homework/").status_code in (302, 401)  # not signed in
    launch(app.test_client(), platform, {"sub": "s-1", "name": "Stu", "role": "Learner"})
    assert _role(app, course, "s-1") == "student"
    launch(app.test_client(), platform, {"sub": "s-1", "name": "Stu", "role": "Mentor"})  # became an observer
    assert _role(app, course, "s-1") is None and _changes(app, "s-1")[-1] == ("student", None, "launch")
    platform.members = [{"user_id": "t-1", "roles": [ROLE + "Instructor"], "status": "Active"},
                        {"user_id": "m-2", "name": "Canvas observer", "roles": [ROLE + "Mentor"], "status": "Active"}]
    with app.app_context():
        counts = roster.sync(course)
        assert counts["observer"] == 1
        assert db.session.scalar(db.select(LtiUser).where(LtiUser.sub == "m-2")) is None  # no account made
        assert build_gradebook(db.session.get(Course, course)).rows == []  # s-1 is an observer now
        assert db.session.scalar(db.select(db.func.count()).select_from(Membership)
                                 .where(Membership.course_id == course, Membership.role == "student")) == 0


def test_an_institution_role_alone_grants_nothing_in_a_course(app, platform, course) -> None:  # noqa: F811
    admin = app.test_client()
    resp, _ = launch(admin, platform, ADMIN)
    assert resp.status_code == 200 and _role(app, course, "a-1") is None
    assert admin.get("/dashboard/DDP101/").status_code in (302, 401, 404)
    platform.context = {"id": "ctx-other", "label": "NEW1", "title": "Unknown course"}
    resp, _ = launch(app.test_client(), platform, ADMIN)  # may not create a course either
    assert resp.status_code == 400 and "not set up in distgrade yet" in resp.get_data(as_text=True)


@pytest.mark.parametrize("skew, accepted", [
    ({"iat": +5, "nbf": +5}, True),  # the LMS's clock is 5 s ahead
    ({"iat": -400, "exp": -20}, True),  # expired 20 s ago by our clock
    ({"iat": +300, "nbf": +300}, False),  # five minutes in the future: not skew
    ({"iat": -900, "exp": -600}, False)])
def test_the_token_times_have_a_leeway(app, client, platform, course, skew, accepted) -> None:  # noqa: F811
    q = _auth_request(client, platform, {"sub": "s-2", "role": "Learner"})
    now = int(time.time())
    token = platform.sign(platform.claims(q["nonce"], **{k: now + v for k, v in skew.items()}))
    resp = client.post("/lti/launch?lang=en", data={"id_token": token, "state": q["state"]})
    assert (resp.status_code == 302) == accepted, resp.get_data(as_text=True)[:600]
