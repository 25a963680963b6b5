"""Setting distgrade up in an LMS and keeping it running: Canvas's JSON configuration URL; listing
and removing a registration or one of its deployments (its launches are refused after, its courses
and accounts stay); rotating the tool's key with the old public key kept in the JWKS for a while."""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from server.extensions import db
from server.lti import keys
from server.lti.models import LtiContext, LtiPlatform
from server.models import Course, utcnow
from tests.server.lti.test_launch import STUDENT, TEACHER, _create_course, launch, platform  # noqa: F401


def test_canvas_reads_its_configuration_from_a_url(client) -> None:
    conf = client.get("/lti/canvas.json", base_url="https://grader.example.edu").get_json()
    assert conf["oidc_initiation_url"] == "https://grader.example.edu/lti/login"
    assert conf["target_link_uri"] == "https://grader.example.edu/lti/launch"
    assert conf["public_jwk_url"] == "https://grader.example.edu/lti/jwks.json"
    assert {"https://purl.imsglobal.org/spec/lti-ags/scope/score",
            "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"} <= set(conf["scopes"])
    canvas = conf["extensions"][0]
    assert canvas["platform"] == "canvas.instructure.com" and canvas["privacy_level"] == "public"
    kinds = {p["placement"]: p["message_type"] for p in canvas["settings"]["placements"]}
    assert kinds["link_selection"] == kinds["assignment_selection"] == "LtiDeepLinkingRequest"


def test_list_and_remove_a_deployment_then_the_registration(app, client, platform) -> None:  # noqa: F811
    first, _ = launch(client, platform, TEACHER)
    _create_course(client, first.get_data(as_text=True))
    runner = app.test_cli_runner()
    listed = runner.invoke(args=["lti", "list"])
    assert listed.exit_code == 0 and platform.issuer in listed.output and "dep-1" in listed.output
    assert "DDP101" in listed.output  # which courses the registration serves
    with app.app_context():
        pid = db.session.scalar(db.select(LtiPlatform.id))
    runner.invoke(args=["lti", "register", "--issuer", platform.issuer, "--client-id", platform.client_id,
                        "--login-url", platform.url + "/auth", "--token-url", platform.url + "/token",
                        "--jwks-url", platform.url + "/jwks", "--deployment", "dep-1", "--deployment", "dep-2"])
    out = runner.invoke(args=["lti", "remove", "--platform", str(pid), "--deployment", "dep-1"])
    assert out.exit_code == 0, out.output
    refused, _ = launch(app.test_client(), platform, STUDENT)
    assert refused.status_code == 400 and "deployment is not registered" in refused.get_data(as_text=True)
    out = runner.invoke(args=["lti", "remove", "--platform", str(pid)])
    assert out.exit_code == 0, out.output
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(LtiPlatform)) == 0
        assert db.session.scalar(db.select(db.func.count()).select_from(LtiContext)) == 0
        assert db.session.scalar(db.select(Course.id).where(Course.code == "DDP101")) is not None  # the course stays
    gone = app.test_client().post("/lti/login?lang=en", data={"iss": platform.issuer, "login_hint": "hint",
                                                              "client_id": platform.client_id})
    assert gone.status_code == 400 and "not registered" in gone.get_data(as_text=True)  # the LMS is unknown now


def test_the_platforms_page_lists_and_removes(app, client, auth, platform) -> None:  # noqa: F811
    auth.login("teacher", "teacher-pass")
    page = client.get("/lti/platforms?lang=en").get_data(as_text=True)
    assert platform.issuer in page and "Remove" in page
    with app.app_context():
        pid = db.session.scalar(db.select(LtiPlatform.id))
    resp = client.post("/lti/platforms", data={"action": "remove", "platform": pid})
    assert resp.status_code == 302
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(LtiPlatform)) == 0


def test_key_rotation_keeps_the_old_public_key_for_a_while(app, client) -> None:
    var = app.config["VAR_DIR"]
    before = client.get("/lti/jwks.json").get_json()["keys"]
    out = app.test_cli_runner().invoke(args=["lti", "rotate-key", "--keep-days", "7"])
    assert out.exit_code == 0, out.output
    after = client.get("/lti/jwks.json").get_json()["keys"]
    assert [k["kid"] for k in after] == [keys.kid(var), before[0]["kid"]] and after[0]["kid"] != before[0]["kid"]
    assert all("d" not in k for k in after)
    assert Path(var, keys.KEY_FILE).stat().st_mode & 0o777 == 0o600
    # seven days later the old key is gone from the set
    retired = Path(var) / keys.RETIRED_FILE
    rows = json.loads(retired.read_text())
    rows[0]["until"] = (utcnow() - timedelta(seconds=1)).isoformat()
    retired.write_text(json.dumps(rows))
    assert [k["kid"] for k in client.get("/lti/jwks.json").get_json()["keys"]] == [keys.kid(var)]


@pytest.mark.parametrize("base, warned", [("http://127.0.0.1:5000", True), ("http://grader.example.edu", True),
                                          ("https://localhost", True), ("https://grader.example.edu", False)])
def test_the_registration_page_warns_about_an_address_the_lms_cannot_use(client, base, warned) -> None:
    client.post("/login", data={"username": "teacher", "password": "teacher-pass"}, base_url=base)
    page = client.get("/lti/platforms?lang=en", base_url=base).get_data(as_text=True)
    assert ('id="not-public"' in page) == warned
    assert "public https address" in page or not warned
    assert "Example: Canvas" in page and "Example: Moodle" in page and "/mod/lti/auth.php" in page
    zh = client.get("/lti/platforms?lang=zh_CN", base_url=base).get_data(as_text=True)
    assert ("公开的 https 地址" in zh) == warned


def test_the_registration_page_is_in_the_teaching_navigation(client, auth) -> None:
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    assert 'href="/lti/platforms"' in page
