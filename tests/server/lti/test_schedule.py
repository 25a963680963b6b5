"""The roster sync on a schedule: the workers' reconcile loop queues one roster job per linked course
every LTI_ROSTER_SYNC_S (once for the whole fleet, however many workers run the loop); the job runs
on the LTI queue, so an LMS that hangs never holds up grading; its outcome shows on the course's page."""
from __future__ import annotations

from server.extensions import db
from server.lti import schedule
from server.models import Course
from tests.server.lti.platform import ROLE
from tests.server.lti.test_launch import TEACHER, _create_course, launch, platform  # noqa: F401
from tests.server.lti.test_passback import _drain


def test_the_reconcile_loop_queues_a_roster_sync_once_per_period(app, client, platform) -> None:  # noqa: F811
    first, _ = launch(client, platform, TEACHER)
    _create_course(client, first.get_data(as_text=True))
    platform.tool_jwks = client.get("/lti/jwks.json").get_json()
    platform.members = [{"user_id": "t-1", "roles": [ROLE + "Instructor"], "status": "Active"},
                        {"user_id": "s-new", "name": "New Student", "roles": [ROLE + "Learner"], "status": "Active"}]
    app.config["LTI_ROSTER_SYNC_S"] = 3600
    with app.app_context():
        assert schedule.reconcile() == 1  # one course linked to an LMS with a roster service
        assert schedule.reconcile() == 0  # a second worker, or the next pass: not due yet
        course_id = db.session.scalar(db.select(Course.id).where(Course.code == "DDP101"))
    _drain(app)
    page = client.get("/lti/DDP101/passback?lang=en").get_data(as_text=True)
    assert "Last roster sync" in page and "1 students" in page
    assert "New Student" in page  # the role it was given is in the role changes
    with app.app_context():
        from server.lti.models import LtiUser
        assert db.session.scalar(db.select(LtiUser).where(LtiUser.sub == "s-new")) is not None
        last = schedule.last_sync(course_id)
        assert last["counts"]["student"] == 1 and not last["error"]
    app.config["LTI_ROSTER_SYNC_S"] = 0  # off
    with app.app_context():
        assert schedule.reconcile() == 0


def test_a_failing_lms_is_recorded_not_raised(app, client, platform) -> None:  # noqa: F811
    first, _ = launch(client, platform, TEACHER)
    _create_course(client, first.get_data(as_text=True))
    platform.tool_jwks = {"keys": []}  # the LMS cannot verify the tool: every token request fails
    app.config["LTI_ROSTER_SYNC_S"] = 3600
    with app.app_context():
        course_id = db.session.scalar(db.select(Course.id).where(Course.code == "DDP101"))
        schedule.roster_job(course_id)
        assert schedule.last_sync(course_id)["error"]
