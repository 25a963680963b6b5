"""Linking an LMS course to a distgrade course that already exists: its instructor makes a one-time
link code on the course's LMS page; the LMS instructor's first launch from the new LMS course offers
it beside "create"; the code links the LMS course to that course instead of making a new one."""
from __future__ import annotations

from server.extensions import db
from server.lti.models import LtiContext, LtiUser
from server.models import Course, User
from tests.server.lti.test_launch import STUDENT, TEACHER, _counts, launch, platform  # noqa: F401


def _code(client, auth) -> str:
    auth.login("teacher", "teacher-pass")
    page = client.post("/lti/DIST101/passback?lang=en", data={"action": "link"}, follow_redirects=True)
    return page.get_data(as_text=True).split('id="link-code">')[1].split("<")[0]


def test_a_link_code_links_the_lms_course_to_an_existing_course(app, client, auth, platform) -> None:  # noqa: F811
    code = _code(client, auth)
    lms = app.test_client()
    first, _ = launch(lms, platform, TEACHER)
    page = first.get_data(as_text=True)
    assert "link code" in page.lower()
    launch_id = page.split('name="launch_id" value="')[1].split('"')[0]
    with app.app_context():
        courses = db.session.scalar(db.select(db.func.count()).select_from(Course))
    wrong = lms.post("/lti/create-course?lang=en", data={"launch_id": launch_id, "link_code": "nope"})
    assert wrong.status_code == 400 and "link code" in wrong.get_data(as_text=True).lower()
    done = lms.post("/lti/create-course", data={"launch_id": launch_id, "link_code": code})
    assert done.status_code == 302, done.get_data(as_text=True)[:500]
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Course)) == courses  # none made
        ctx = db.session.scalar(db.select(LtiContext))
        dist = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
        assert ctx.course_id == dist.id and ctx.context_id == "ctx-42"
        teacher = db.session.scalar(db.select(User).join(LtiUser).where(LtiUser.sub == TEACHER["sub"]))
        assert teacher.role_in(dist.id).value == "instructor"
    student, _ = launch(app.test_client(), platform, STUDENT)  # students of the LMS course land in DIST101
    assert student.status_code == 302
    with app.app_context():
        user = db.session.scalar(db.select(User).join(LtiUser).where(LtiUser.sub == STUDENT["sub"]))
        assert user.role_in(dist.id).value == "student"


def test_a_link_code_works_once(app, client, auth, platform) -> None:  # noqa: F811
    code = _code(client, auth)
    for sub, status in (("t-1", 302), ("t-9", 400)):
        platform.context = {"id": f"ctx-{sub}", "label": "X", "title": "X"}
        lms = app.test_client()
        first, _ = launch(lms, platform, {**TEACHER, "sub": sub})
        launch_id = first.get_data(as_text=True).split('name="launch_id" value="')[1].split('"')[0]
        assert lms.post("/lti/create-course", data={"launch_id": launch_id, "link_code": code}).status_code == status
