"""LTI 1.3 launch against a real platform over real HTTP on 127.0.0.1 (tests/server/lti/platform.py):
OIDC login initiation, the platform's authorisation endpoint answering with a signed id_token,
the tool fetching the platform's JWKS, the launch signing the user in to the right course with
the right role. Bad input gets a clear error and changes nothing: a forged or expired token, a
wrong audience, a replayed nonce, an unknown deployment, a course the tool does not know (the
instructor is offered to create it; a student is told to wait for them)."""
from __future__ import annotations

import time
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from server.extensions import db
from server.lti.models import LtiContext, LtiNonce, LtiUser
from server.models import Course, Membership, User
from tests.server.lti.platform import Platform, form_fields

TEACHER = {"sub": "t-1", "name": "Prof. Wang", "email": "wang@example.edu", "role": "Instructor"}
STUDENT = {"sub": "s-7", "name": "Li Lei", "email": "li@example.edu", "role": "Learner"}


@pytest.fixture
def platform(app):
    p = Platform().start()
    runner = app.test_cli_runner()
    out = runner.invoke(args=["lti", "register", "--issuer", p.issuer, "--client-id", p.client_id,
                              "--login-url", p.url + "/auth", "--token-url", p.url + "/token",
                              "--jwks-url", p.url + "/jwks", "--deployment", p.deployment])
    assert out.exit_code == 0, out.output
    yield p
    p.stop()


def _login(client, platform) -> dict[str, str]:
    """Third-party initiated login; returns the authorisation request the tool sent the browser to."""
    resp = client.post("/lti/login", data={"iss": platform.issuer, "login_hint": "hint", "client_id": platform.client_id,
                                           "target_link_uri": "http://localhost/lti/launch"})
    assert resp.status_code == 302, resp.get_data(as_text=True)[:400]
    location = resp.headers["Location"]
    assert location.startswith(platform.url + "/auth?")
    return location


def launch(client, platform, user: dict, lang: str | None = "en") -> tuple:
    """The whole browser round trip: tool login -> platform /auth (real HTTP) -> tool launch."""
    platform.user = user
    page = requests.get(_login(client, platform), timeout=10)
    assert page.status_code == 200, page.text
    fields = form_fields(page.text)
    return client.post("/lti/launch" + (f"?lang={lang}" if lang else ""), data=fields), fields


def _counts(app) -> tuple:
    with app.app_context():
        return tuple(db.session.scalar(db.select(db.func.count()).select_from(t))
                     for t in (User, Membership, Course, LtiUser, LtiContext))


def _create_course(client, page: str):
    launch_id = page.split('name="launch_id" value="')[1].split('"')[0]
    return client.post("/lti/create-course", data={"launch_id": launch_id})


def test_teacher_creates_the_course_then_students_land_signed_in(app, client, platform) -> None:
    resp, _ = launch(client, platform, TEACHER)
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "Create the course" in page and "Distributed training" in page
    done = _create_course(client, page)
    assert done.status_code == 302
    with app.app_context():
        course = db.session.scalar(db.select(Course).where(Course.code == "DDP101"))
        teacher = db.session.scalar(db.select(User).join(LtiUser).where(LtiUser.sub == "t-1"))
        assert teacher.role_in(course.id).value == "instructor" and teacher.display_name == "Prof. Wang"
        course_id = course.id
    assert client.get("/dashboard/DDP101/").status_code == 200  # signed in, as the course's instructor

    student = app.test_client()
    platform.custom = {"item": "hw:hello_ddp"}
    resp, _ = launch(student, platform, STUDENT)
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/homework/DDP101/hello_ddp")
    with app.app_context():
        user = db.session.scalar(db.select(User).join(LtiUser).where(LtiUser.sub == "s-7"))
        assert user.role_in(course_id).value == "student" and user.email == "li@example.edu"
    assert student.get("/homework/?lang=en").status_code == 200
    assert student.get("/dashboard/DDP101/").status_code == 404  # a student, not an instructor
    before = _counts(app)
    again, _ = launch(app.test_client(), platform, STUDENT)  # a second launch: the same account
    assert again.status_code == 302 and _counts(app) == before


def test_local_accounts_still_sign_in(client, auth, platform) -> None:
    assert auth.login("alice", "alice-pass").status_code == 302
    assert client.get("/homework/").status_code == 200


def test_the_tool_serves_its_public_key(app, client, platform) -> None:
    jwks = client.get("/lti/jwks.json").get_json()
    assert jwks["keys"][0]["kty"] == "RSA" and "d" not in jwks["keys"][0]  # public half only
    key = __import__("pathlib").Path(app.config["VAR_DIR"]) / "lti-tool-key.pem"
    assert key.stat().st_mode & 0o777 == 0o600


def _auth_request(client, platform, user) -> dict[str, str]:
    platform.user = user
    return {k: v[0] for k, v in parse_qs(urlparse(_login(client, platform)).query).items()}


@pytest.mark.parametrize("case", ["forged", "expired", "wrong_audience", "unknown_deployment", "no_state"])
def test_bad_tokens_are_refused_and_change_nothing(app, client, platform, case) -> None:
    q = _auth_request(client, platform, TEACHER)
    over, key = {}, None
    if case == "forged":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # same kid, someone else's key
    elif case == "expired":
        over = {"iat": int(time.time()) - 900, "exp": int(time.time()) - 600}
    elif case == "wrong_audience":
        over = {"aud": "another-tool"}
    elif case == "unknown_deployment":
        over = {"https://purl.imsglobal.org/spec/lti/claim/deployment_id": "dep-999"}
    token = platform.sign(platform.claims(q["nonce"], **over), key=key)
    before = _counts(app)
    resp = client.post("/lti/launch?lang=en", data={"id_token": token, "state": "" if case == "no_state" else q["state"]})
    page = resp.get_data(as_text=True)
    assert resp.status_code == 400 and "Launch refused" in page and "Nothing was created or changed." in page
    if case == "unknown_deployment":
        assert "deployment is not registered" in page
    assert _counts(app) == before
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(LtiNonce)) == 0


def test_a_replayed_launch_is_refused(app, client, platform) -> None:
    first, fields = launch(client, platform, TEACHER)
    assert first.status_code == 200
    _create_course(client, first.get_data(as_text=True))
    before = _counts(app)
    replay = client.post("/lti/launch?lang=en", data=fields)
    assert replay.status_code == 400 and "already used" in replay.get_data(as_text=True)
    assert _counts(app) == before


def test_a_student_of_an_unknown_course_is_told_so(app, client, platform) -> None:
    before = _counts(app)
    resp, _ = launch(client, platform, STUDENT)
    assert resp.status_code == 400 and "not set up in distgrade yet" in resp.get_data(as_text=True)
    zh = app.test_client()
    zh.get("/login?lang=zh_CN")  # the language is chosen before signing in, as on the login page
    assert "尚未在 distgrade 中设置" in launch(zh, platform, STUDENT, lang=None)[0].get_data(as_text=True)
    assert _counts(app) == before
    assert client.get("/homework/").status_code in (302, 401)  # not signed in
