"""Login, logout, login-required everywhere, safe redirects and CSRF."""
from __future__ import annotations

import re

import pytest


def test_login_page_renders(client):
    r = client.get("/login")
    assert r.status_code == 200
    assert b'name="username"' in r.data and b'name="password"' in r.data
    assert b'<label for="username">' in r.data


def test_login_success_and_logout(client, auth):
    r = auth.login()
    assert r.status_code == 302 and r.location.endswith("/homework/")
    assert client.get("/homework/").status_code == 200
    r = auth.logout()
    assert r.status_code == 302 and "/login" in r.location
    assert client.get("/homework/").status_code == 302


@pytest.mark.parametrize("username, password", [
    ("alice", "wrong"), ("nobody", "alice-pass"), ("", ""), ("alice", ""),
])
def test_login_rejected(client, auth, username, password):
    r = client.post("/login?lang=en", data={"username": username, "password": password})
    assert r.status_code == 401
    assert b"username" in r.data.lower()
    assert client.get("/homework/").status_code == 302


@pytest.mark.parametrize("path", ["/", "/homework/", "/homework/DIST101/x", "/submissions/1",
                                  "/submissions/1/report", "/instructor/", "/instructor/DIST101/roster"])
def test_pages_need_login(client, path):
    r = client.get(path)
    assert r.status_code == 302 and "/login" in r.location


def test_api_needs_login_as_json(client):
    r = client.get("/api/submissions/1")
    assert r.status_code == 401 and r.is_json


def test_logout_is_post_only(client, auth):
    auth.login()
    assert client.get("/logout").status_code == 405


@pytest.mark.parametrize("target, expected", [
    ("/submissions/7", "/submissions/7"),
    ("https://evil.example/", "/homework/"),
    ("//evil.example/", "/homework/"),
    ("javascript:alert(1)", "/homework/"),
])
def test_next_stays_on_site(client, target, expected):
    r = client.post("/login", query_string={"next": target}, data={"username": "alice", "password": "alice-pass"})
    assert r.status_code == 302 and r.location == expected


def test_csrf_enforced_when_enabled(app):
    """With CSRF on (as in production) a POST without the token is refused, with it accepted."""
    app.config["WTF_CSRF_ENABLED"] = True
    client = app.test_client()
    r = client.post("/login", data={"username": "alice", "password": "alice-pass"})
    assert r.status_code == 400
    assert client.get("/homework/").status_code == 302  # not signed in

    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    r = client.post("/login", data={"username": "alice", "password": "alice-pass", "csrf_token": token})
    assert r.status_code == 302
    # Signed in, a form without its token (here: logout, language) is still refused.
    assert client.post("/logout").status_code == 400
    assert client.post("/lang", data={"lang": "en"}).status_code == 400
    assert client.get("/homework/").status_code == 200
