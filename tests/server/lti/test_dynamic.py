"""LTI Dynamic Registration (1EdTech, as Canvas and Moodle offer it): an instructor makes a one-time
registration URL on the platforms page; the LMS opens it with its openid_configuration; distgrade
reads the platform's configuration, registers itself at the platform's registration endpoint, stores
the registration the platform answered with (client id, deployment) and tells the LMS it is done.
A used, unknown or mismatched registration changes nothing."""
from __future__ import annotations

import pytest

from server.extensions import db
from server.lti.models import LtiPlatform
from tests.server.lti.platform import Platform
from tests.server.lti.test_launch import TEACHER, _create_course, launch


@pytest.fixture
def lms():
    p = Platform().start()
    yield p
    p.stop()


def _registration_url(client, auth) -> str:
    auth.login("teacher", "teacher-pass")
    page = client.post("/lti/platforms?lang=en", data={"action": "dynamic"}, follow_redirects=True).get_data(as_text=True)
    return page.split('id="dynamic-url">')[1].split("<")[0]


def _open(client, url: str, lms: Platform, config: str | None = None):
    return client.get(url, query_string={"openid_configuration": config or lms.url + "/.well-known/openid-configuration",
                                         "registration_token": lms.registration_token})


def test_dynamic_registration_registers_and_launches_work(app, client, auth, lms) -> None:
    url = _registration_url(client, auth)
    assert "/lti/dynamic/" in url
    lmsside = app.test_client()  # the LMS admin's browser, not signed in to distgrade
    resp = _open(lmsside, url, lms)
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "org.imsglobal.lti.close" in page, page[:800]
    sent = lms.registrations[0]
    assert sent["initiate_login_uri"].endswith("/lti/login") and sent["jwks_uri"].endswith("/lti/jwks.json")
    assert any(u.endswith("/lti/launch") for u in sent["redirect_uris"])
    assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in sent["scope"].split()
    with app.app_context():
        row = db.session.scalar(db.select(LtiPlatform))
        assert (row.issuer, row.client_id, row.deployment_ids) == (lms.issuer, lms.client_id, [lms.deployment])
        assert row.auth_login_url == lms.url + "/auth"
    first, _ = launch(app.test_client(), lms, TEACHER)  # the LMS's launches now work
    assert first.status_code == 200 and "Create the course" in first.get_data(as_text=True)
    again = _open(app.test_client(), url, lms)  # the URL is used up
    assert again.status_code == 404 and len(lms.registrations) == 1


@pytest.mark.parametrize("case", ["unknown_token", "foreign_issuer", "no_config"])
def test_a_bad_dynamic_registration_changes_nothing(app, client, auth, lms, case) -> None:
    url = _registration_url(client, auth)
    if case == "unknown_token":
        url = url.rsplit("/", 1)[0] + "/not-a-token"
    config = {"foreign_issuer": "https://elsewhere.example/.well-known/openid-configuration",
              "no_config": lms.url + "/nothing-here"}.get(case)
    if case == "foreign_issuer":  # a configuration whose URL is not under its own issuer
        lms.issuer = "https://lms.example"
        config = lms.url + "/.well-known/openid-configuration"
    resp = _open(app.test_client(), url, lms, config)
    assert resp.status_code in (400, 404)
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(LtiPlatform)) == 0
    assert lms.registrations == []
