"""A logged-in status API call under 50 concurrent clients vs a bare Flask endpoint.

Both are served by gunicorn with the same settings, measured in one run.
Goal: throughput >= 0.5x of the bare endpoint, p99 < 100 ms.
Run: ``.venv/bin/python -m bench.web_status``.
"""
from __future__ import annotations

import http.client
import os
import re
import tempfile
import urllib.parse
from pathlib import Path

from bench.common import redis_server
from bench.loadgen import gunicorn, prepare_database, print_vs_bare, run_load, sql_statements

CLIENTS = int(os.environ.get("BENCH_CLIENTS", "50"))
PER_CLIENT = int(os.environ.get("BENCH_REQUESTS", "40"))


def login_cookie(port: int, username: str, password: str) -> str:
    """Log in through the real form (CSRF token included) and return the session cookie."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # the workers may still be starting
    conn.request("GET", "/login")
    resp = conn.getresponse()
    page = resp.read().decode()
    cookie = resp.getheader("Set-Cookie", "").split(";")[0]
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page)
    body = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrf_token": token.group(1) if token else ""})
    conn.request("POST", "/login", body=body, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
    resp = conn.getresponse()
    resp.read()
    # every cookie the sign-in set (the session and, since sign-in knows devices, dg_device): one header each
    new_cookies = [c.split(";")[0] for c in resp.msg.get_all("Set-Cookie") or []]
    if resp.status not in (302, 303):
        raise RuntimeError(f"login failed with HTTP {resp.status}")
    session = [c for c in new_cookies if c.startswith("session=")] or [cookie]
    return "; ".join(session + [c for c in new_cookies if not c.startswith("session=")])


def store_graded_submission(env: dict[str, str]) -> int:
    """A fresh database with one graded submission for alice; returns its id."""
    out = prepare_database(env, (
        "from server.models import Submission, User, Course\nwith app.app_context():\n"
        "    u = db.session.scalar(db.select(User).where(User.username == 'alice'))\n"
        "    c = db.session.scalar(db.select(Course))\n"
        "    s = Submission(user_id=u.id, course_id=c.id, assignment_id='ddp_speedup', filename='t.py',"
        " content=b'x', sha256='0'*64, size=1, status='graded', score=1.0, max_score=2.0)\n"
        "    db.session.add(s); db.session.commit(); print(s.id)\n"))
    return int(out.strip().splitlines()[-1])


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, redis_server() as redis_url:
        env = dict(os.environ, DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}", REDIS_URL=redis_url,
                   DISTGRADE_VAR_DIR=tmp, SECRET_KEY="bench-only-secret-key-0123456789")
        sid = store_graded_submission(env)
        with gunicorn("bench.bare_app:app") as server:
            run_load(server, lambda i: [("GET", "/ping", None, {})] * 5, clients=CLIENTS)  # warm-up
            bare = run_load(server, lambda i: [("GET", "/ping", None, {})] * PER_CLIENT, clients=CLIENTS)
        with gunicorn("server.wsgi:app", env) as server:
            cookie = login_cookie(server.port, "alice", "alice-pass")
            plan = [("GET", f"/api/submissions/{sid}", None, {"Cookie": cookie})]
            run_load(server, lambda i: plan * 5, clients=CLIENTS)
            status = run_load(server, lambda i: plan * PER_CLIENT, clients=CLIENTS)
            status.sql_per_request = sql_statements(env, plan * 3)
    print_vs_bare(f"web: {CLIENTS} concurrent clients x {PER_CLIENT} requests, same gunicorn settings",
                  bare, [("status API (logged in)", status, True)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
