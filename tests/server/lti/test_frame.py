"""distgrade inside the LMS's frame: over HTTPS (or behind a TLS proxy that TRUSTED_PROXIES believes)
the session and OIDC state cookies are ``SameSite=None; Secure; Partitioned``, so a cross-site frame
keeps them (CHIPS keeps a partitioned cookie where third-party cookies are blocked); over plain HTTP
the session stays ``Lax``. Where the frame has no cookies, the OIDC state is kept with the platform
(1EdTech client-side postMessage storage, ``lti_storage_target``) and checked by the tool's page,
whose confirmation counts only from the tool's own origin; with no platform storage the refusal
offers a new window. The Chromium walk across two sites is in test_frame_browser.py."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
import requests

from server.extensions import db
from server.lti.models import LtiUser
from server.models import User
from tests.server.lti.platform import form_fields
from tests.server.lti.test_launch import TEACHER, _create_course, launch, platform  # noqa: F401

HTTPS = "https://tool.example"
STUDENT = {"sub": "s-frame", "name": "Framed Student", "role": "Learner"}


def _cookies(resp) -> dict[str, str]:
    return {h.split("=", 1)[0]: h for h in resp.headers.getlist("Set-Cookie")}


def _login_params(platform, **extra) -> dict[str, str]:  # noqa: F811
    return {"iss": platform.issuer, "login_hint": "hint", "client_id": platform.client_id,
            "target_link_uri": HTTPS + "/lti/launch", **extra}


@pytest.fixture
def course(app, client, platform):  # noqa: F811
    first, _ = launch(client, platform, TEACHER)
    _create_course(client, first.get_data(as_text=True))


def _framed_login(client, platform, **extra):  # noqa: F811
    return client.post("/lti/login", data=_login_params(platform, **extra), base_url=HTTPS,
                       headers={"Sec-Fetch-Dest": "iframe"})


def _auth_url(page: str) -> str:
    return page.split('data-auth-url="')[1].split('"')[0].replace("&amp;", "&")


def test_over_https_the_launch_cookies_work_in_a_cross_site_frame(app, platform, course) -> None:  # noqa: F811
    student = app.test_client()
    login = _framed_login(student, platform)
    assert login.status_code == 200  # a page that checks cookies work in the frame, then goes on
    state_cookie = next(v for k, v in _cookies(login).items() if k.startswith("lti1p3-state"))
    assert "SameSite=None" in state_cookie and "Secure" in state_cookie and "Partitioned" in state_cookie
    platform.user = STUDENT
    fields = form_fields(requests.get(_auth_url(login.get_data(as_text=True)), timeout=10).text)
    resp = student.post("/lti/launch", data=fields, base_url=HTTPS)
    assert resp.status_code == 302, resp.get_data(as_text=True)[:500]
    session = _cookies(resp)["session"]
    assert "SameSite=None" in session and "Secure" in session and "Partitioned" in session
    assert student.get("/homework/", base_url=HTTPS).status_code == 200


def test_plain_http_keeps_a_lax_session(app, client, platform, course) -> None:  # noqa: F811
    resp, _ = launch(app.test_client(), platform, STUDENT)
    assert "SameSite=Lax" in _cookies(resp)["session"] and "Partitioned" not in _cookies(resp)["session"]


@pytest.mark.parametrize("hops, framed", [(1, True), (0, False)])
def test_behind_a_tls_proxy_trusted_proxies_decides(app, platform, hops, framed) -> None:  # noqa: F811
    from server import create_app

    keep = ("SQLALCHEMY_DATABASE_URI", "REDIS_URL", "VAR_DIR", "SECRET_KEY")
    proxied = create_app({"TESTING": True, "TRUSTED_PROXIES": hops, **{k: app.config[k] for k in keep}}).test_client()
    login = proxied.get("/lti/login", query_string=_login_params(platform),
                        headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "tool.example"})
    assert login.status_code == 302
    state_cookie = next(v for k, v in _cookies(login).items() if k.startswith("lti1p3-state"))
    assert ("SameSite=None" in state_cookie) == framed and ("Secure" in state_cookie) == framed
    assert login.headers["Location"].count("redirect_uri=https%3A%2F%2Ftool.example") == framed
    page = proxied.get("/login", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "tool.example"})
    session = _cookies(page)["session"]  # the sign-in form's CSRF token starts a session
    assert ("SameSite=None" in session and "Secure" in session and "Partitioned" in session) == framed
    assert ("SameSite=Lax" in session) != framed


def _storage_launch(app, platform, student):  # noqa: F811
    """A framed login with platform storage; the browser then loses every cookie (third-party cookies
    blocked) and posts the platform's id_token to the launch."""
    login = _framed_login(student, platform, lti_storage_target="_parent")
    page = login.get_data(as_text=True)
    assert 'data-storage-target="_parent"' in page and f'data-platform-origin="{platform.url}"' in page
    platform.user = STUDENT
    fields = form_fields(requests.get(_auth_url(page), timeout=10).text)
    student.delete_cookie("session")
    for name in [c.key for c in student._cookies.values()]:
        student.delete_cookie(name, domain="tool.example")
    return fields


def test_platform_storage_keeps_the_state_when_the_frame_has_no_cookies(app, platform, course) -> None:  # noqa: F811
    student = app.test_client()
    fields = _storage_launch(app, platform, student)
    check = student.post("/lti/launch", data=fields, base_url=HTTPS)
    page = check.get_data(as_text=True)
    assert check.status_code == 200 and 'data-mode="check"' in page and f'data-platform-origin="{platform.url}"' in page
    assert f'data-state="{fields["state"]}"' in page
    # a forged confirmation from another site (a form on the attacker's page) counts for nothing
    forged = student.post("/lti/launch", data={**fields, "lti_storage_checked": "1"}, base_url=HTTPS,
                          headers={"Sec-Fetch-Site": "cross-site"})
    assert forged.status_code in (200, 400) and 'data-mode="check"' in forged.get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(db.select(LtiUser).where(LtiUser.sub == STUDENT["sub"])) is None
    # the tool's own page, having read the state back from the platform, confirms: signed in
    done = student.post("/lti/launch", data={**fields, "lti_storage_checked": "1"}, base_url=HTTPS,
                        headers={"Sec-Fetch-Site": "same-origin"})
    assert done.status_code == 302, done.get_data(as_text=True)[:600]
    with app.app_context():
        assert db.session.scalar(db.select(User).join(LtiUser).where(LtiUser.sub == STUDENT["sub"])) is not None
    again = app.test_client().post("/lti/launch", data={**fields, "lti_storage_checked": "1"}, base_url=HTTPS,
                                   headers={"Sec-Fetch-Site": "same-origin"})
    assert again.status_code == 400  # the stored state is used once


def test_no_cookies_and_no_platform_storage_offers_a_new_window(app, platform, course) -> None:  # noqa: F811
    student = app.test_client()
    login = _framed_login(student, platform, lti_message_hint="rl-1")
    page = login.get_data(as_text=True)
    assert 'id="new-window"' in page and 'data-storage-target=""' in page
    platform.user = STUDENT
    fields = form_fields(requests.get(_auth_url(page), timeout=10).text)
    for name in [c.key for c in student._cookies.values()]:
        student.delete_cookie(name, domain="tool.example")
    resp = student.post("/lti/launch?lang=en", data=fields, base_url=HTTPS)
    body = resp.get_data(as_text=True)
    assert resp.status_code == 400 and "Open in a new window" in body
    again = urlparse(body.split('id="new-window" href="')[1].split('"')[0].replace("&amp;", "&"))
    assert again.path == "/lti/login"
    assert parse_qs(again.query)["lti_message_hint"] == ["rl-1"] and parse_qs(again.query)["iss"] == [platform.issuer]
