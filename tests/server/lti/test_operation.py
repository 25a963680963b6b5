"""Operating an LMS link: "send grades now" reaches the course's own students only; a launch's
``lineitem`` claim is the grade column of that link (none made beside it); deep linking honours
``accept_multiple``."""
from __future__ import annotations

import pytest

from server.extensions import db
from server.lti import passback
from server.models import Course
from tests.server.lti.platform import ROLE
from tests.server.lti.test_launch import STUDENT, TEACHER, _create_course, launch, platform  # noqa: F401
from tests.server.lti.test_passback import _drain, _sent, lms_course  # noqa: F401


def test_send_grades_now_queues_the_course_students_only(app, client, platform, lms_course) -> None:  # noqa: F811
    from server.scores.gradebook import build_gradebook

    course_id, _, _ = lms_course
    platform.context = {"id": "ctx-2", "label": "OTHER", "title": "Another course"}  # a second LMS course
    first, _ = launch(app.test_client(), platform, {**TEACHER, "sub": "t-2"})
    _create_course(app.test_client(), first.get_data(as_text=True))
    launch(app.test_client(), platform, {"sub": "s-other", "name": "Elsewhere", "role": "Learner"})
    with app.app_context():
        items = build_gradebook(db.session.get(Course, course_id)).counted_items
        assert passback.grade_changed(course_id) == len(items)  # s-7 only: not the teachers, not s-other


def test_the_launch_lineitem_is_the_links_grade_column(app, platform, lms_course) -> None:  # noqa: F811
    course_id, student, hw = lms_course
    by_hand = f"{platform.url}/ctx/ctx-42/lineitems/77"  # a column the LMS made with a link added by hand
    platform.lineitems[by_hand] = {"id": by_hand, "label": "Homework 1", "scoreMaximum": 10}
    platform.custom, platform.lineitem = {"item": f"hw:{hw}"}, by_hand
    resp, _ = launch(app.test_client(), platform, STUDENT)
    assert resp.status_code == 302
    with app.app_context():
        passback.grade_changed(course_id, student, f"hw:{hw}")
    _drain(app)
    assert list(platform.lineitems) == [by_hand] and "s-7" in platform.scores.get(by_hand, {})


@pytest.mark.parametrize("accept_multiple, status", [(False, 400), (True, 200), (None, 200)])
def test_deep_linking_honours_accept_multiple(app, client, platform, lms_course, accept_multiple, status) -> None:  # noqa: F811
    platform.next_deep_link, platform.accept_multiple = True, accept_multiple
    resp, _ = launch(client, platform, TEACHER)
    assert resp.headers["Location"].endswith("/lti/DDP101/deep-link")
    page = client.get("/lti/DDP101/deep-link?lang=en").get_data(as_text=True)
    keys = [v.split('"')[0] for v in page.split('name="item" value="')[1:]][:2]
    assert len(keys) == 2
    two = client.post("/lti/DDP101/deep-link?lang=en", data={"item": keys})
    assert two.status_code == status
    if status == 400:
        assert "only one" in two.get_data(as_text=True)
        assert client.post("/lti/DDP101/deep-link", data={"item": keys[0]}).status_code == 200  # one is fine
