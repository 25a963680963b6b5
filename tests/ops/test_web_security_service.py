"""The service as the README starts it (``./distgrade up``: supervisor, gunicorn, worker, embedded
Redis), attacked from outside: nobody signs in without a password.

Shows, on one running service and one restart:
* the session key is generated into ``var/secret_key`` (0600, ``var/`` 0700, the database 0600)
  and kept across restarts (a session from before the restart still works);
* a session cookie signed with the old public default key opens nothing;
* a session cookie replayed after logout opens nothing (pages and the status API);
* the 6th wrong password within a minute is refused with 429 and the form, even the right one.
"""
from __future__ import annotations

import http.client
import os
import re
import signal
import stat
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

from flask.sessions import SecureCookieSessionInterface

from bench.web_status import login_cookie
from server.commands import demo_accounts
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
PUBLIC_DEFAULT = "dev-only-change-me"


def start(tmp_path: Path, port: int) -> subprocess.Popen:
    """``./distgrade up`` minus the install step (the venv exists): the same supervisor, no SECRET_KEY."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "SECRET_KEY")}
    env.update(PORT=str(port), DISTGRADE_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "server.supervisor"], cwd=REPO, env=env,
                            stdout=open(tmp_path / "sup.log", "ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if request(port, "GET", "/login")[0] == 200:
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError((tmp_path / "sup.log").read_text()[-3000:])


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)


def request(port: int, method: str, path: str, cookie: str = "", form: dict | None = None) -> tuple[int, str, str]:
    """(status, body, Location) of one request with an optional cookie and form."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    headers = {"Cookie": cookie} if cookie else {}
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    return resp.status, resp.read().decode("utf-8", "replace"), resp.getheader("Location") or ""


def forge(secret: str, payload: dict) -> str:
    class _App:
        secret_key = secret
        config = {"SECRET_KEY_FALLBACKS": None}
    return "session=" + SecureCookieSessionInterface().get_signing_serializer(_App()).dumps(payload)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_service_refuses_forged_replayed_and_guessed_sign_ins(tmp_path):
    port = free_port()
    var = tmp_path / "var"
    proc = start(tmp_path, port)
    try:
        # The key: generated, private, in a private var/ beside a private database.
        key_file = var / "secret_key"
        key = key_file.read_text().strip()
        assert len(key) >= 32 and mode(key_file) == 0o600
        assert mode(var) == 0o700 and mode(var / "distgrade.db") == 0o600
        assert "session key:" in (tmp_path / "sup.log").read_text()

        # A cookie signed with the public default key, for every plausible user id and version.
        for uid in range(1, 4):
            forged = forge(PUBLIC_DEFAULT, {"_user_id": str(uid), "_fresh": True, "_sv": 0})
            status, _, location = request(port, "GET", "/instructor/", forged)
            assert status == 302 and "/login" in location
            assert request(port, "GET", "/api/submissions/1", forged)[0] == 401

        # Each demo account got its own password, kept for the operator only.
        accounts = demo_accounts(var)
        assert mode(var / "demo-accounts.txt") == 0o600 and accounts["teacher"] != "teacher-pass"

        # A cookie replayed after logout.
        cookie = login_cookie(port, "alice", accounts["alice"])
        status, page, _ = request(port, "GET", "/homework/", cookie)
        assert status == 200
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
        assert request(port, "POST", "/logout", cookie, {"csrf_token": token})[0] == 302
        status, _, location = request(port, "GET", "/homework/", cookie)
        assert status == 302 and "/login" in location
        assert request(port, "GET", "/api/submissions/1", cookie)[0] == 401

        kept = login_cookie(port, "teacher", accounts["teacher"])  # used again after the restart
        assert request(port, "GET", "/instructor/", kept)[0] == 200

        # Guessing: five wrong passwords in a minute, then even the right one is refused for a while.
        for guess in ("bob-pass", "a-guess", "a-guess", "a-guess", "a-guess"):  # the old published one first
            assert form_login(port, "bob", guess)[0] == 401
        status, page, _ = form_login(port, "bob", accounts["bob"])
        assert status == 429, page[-800:]
        assert re.search(r"Too many attempts, try again in \d+ s\.", page)
        assert 'name="password"' in page  # the form again
        # counted in the embedded Redis (over its unix socket), shared by both gunicorn processes
        import redis

        from server.auth.counters import key as storage_key

        keys = redis.Redis(unix_socket_path=str(var / "redis.sock")).keys("*login*")
        assert b"LIMITS:" + storage_key("account", "account:bob").encode() in keys, keys  # the name hashed, not as typed
        assert not any(b"bob" in k for k in keys), keys
    finally:
        stop(proc)

    # Restarted on the same var/: the same key, so the session from before still works.
    proc = start(tmp_path, port)
    try:
        assert key_file.read_text().strip() == key and mode(key_file) == 0o600
        assert request(port, "GET", "/instructor/", kept)[0] == 200
    finally:
        stop(proc)


def form_login(port: int, username: str, password: str) -> tuple[int, str, str]:
    """One sign-in through the real form, CSRF token included, as a browser sends it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    conn.request("GET", "/login?lang=en")
    resp = conn.getresponse()
    page = resp.read().decode()
    cookie = resp.getheader("Set-Cookie", "").split(";")[0]
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
    return request(port, "POST", "/login?lang=en", cookie,
                   {"username": username, "password": password, "csrf_token": token})


def test_supervisor_refuses_an_insecure_key_before_starting_anything(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(SECRET_KEY=PUBLIC_DEFAULT, DISTGRADE_VAR_DIR=str(tmp_path / "var"), PORT=str(free_port()))
    out = subprocess.run([sys.executable, "-m", "server.supervisor"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "public default" in out.stderr and "SECRET_KEY" in out.stderr
    assert not (tmp_path / "var" / "distgrade.db").exists()  # nothing was started or migrated
