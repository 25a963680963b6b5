"""Quiz page and answer submission under 50 concurrent simulated students on gunicorn, against a
bare Flask endpoint on the same server settings. Bounded loops on 127.0.0.1; stops by itself.

Each student logs in, starts a practice attempt of the 40-question bank, then alternates
"load the quiz page" and "submit the next answer" (the reference answer of its own variant,
so every submission is graded and stored).
"""
from __future__ import annotations

import http.client
import os
import re
import tempfile
import urllib.parse
from pathlib import Path

from bench.common import redis_server
from bench.loadgen import gunicorn, prepare_database, print_vs_bare, run_load
from bench.web_status import login_cookie
from graders.quiz.bank import load_question, load_quiz
from graders.quiz.grading import make_variant
from graders.quiz.seeds import variant_seed

CLIENTS = int(os.environ.get("BENCH_CLIENTS", "50"))
QUIZ = "ch7_3_practice"


def enrol_students(env: dict[str, str]) -> dict[str, int]:
    """A fresh database with one student per simulated client; returns username -> user id."""
    out = prepare_database(env, (
        "from server.roster import enrol\nfrom server.models import Course, Role\nwith app.app_context():\n"
        "    c = db.session.scalar(db.select(Course))\n"
        f"    users = [enrol(c, f'student{{i}}', role=Role.STUDENT, password='pw')[0] for i in range({CLIENTS})]\n"
        "    db.session.commit()\n    print(' '.join(f'{u.username}={u.id}' for u in users))\n"))
    return {k: int(v) for k, v in (p.split("=") for p in out.split()[-CLIENTS:])}


def start_attempt(port: int, cookie: str) -> tuple[str, str]:
    """Start an attempt through the real form; returns (attempt page path, CSRF token)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", f"/quiz/{QUIZ}/", headers={"Cookie": cookie})
    page = conn.getresponse().read().decode()
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
    conn.request("POST", f"/quiz/{QUIZ}/start", body=urllib.parse.urlencode({"csrf_token": token}),
                 headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"})
    resp = conn.getresponse()
    resp.read()
    return urllib.parse.urlsplit(resp.getheader("Location")).path, token


def answer_body(user_id: int, qid: str, token: str) -> bytes:
    """The form a browser would post for this student's variant, with the reference answer."""
    v = make_variant(load_question(qid), variant_seed(user_id, qid, 1))
    ref, qtype = v.reference("en"), v.question.type
    if qtype in ("single", "multiple"):
        fields = [("choice", i) for i in ref.split(",")]
    elif qtype == "ordering":
        fields = [(f"pos_{i}", str(n + 1)) for n, i in enumerate(ref.split(","))]
    else:
        fields = [("answer", ref)]
    return urllib.parse.urlencode(fields + [("csrf_token", token)]).encode()


def main() -> int:
    questions = load_quiz(QUIZ).question_ids
    with tempfile.TemporaryDirectory() as tmp, redis_server() as redis_url:
        env = dict(os.environ, DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}", REDIS_URL=redis_url,
                   DISTGRADE_VAR_DIR=tmp, SECRET_KEY="bench")
        users = enrol_students(env)
        n_req = 2 * len(questions)
        with gunicorn("bench.bare_app:app") as port:
            run_load(port, lambda i: [("GET", "/ping", None, {})] * 5, clients=CLIENTS)
            bare = run_load(port, lambda i: [("GET", "/ping", None, {})] * n_req, clients=CLIENTS)
        with gunicorn("server.wsgi:app", env) as port:
            plans = []
            for name, uid in users.items():
                cookie = login_cookie(port, name, "pw")
                path, token = start_attempt(port, cookie)
                post = {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded",
                        "Accept": "application/json"}
                plan = []
                for pos, qid in enumerate(questions):
                    plan.append(("GET", path, None, {"Cookie": cookie}))
                    plan.append(("POST", f"{path}/answer/{pos}", answer_body(uid, qid, token), post))
                plans.append(plan)
            quiz = run_load(port, lambda i: plans[i], clients=CLIENTS)
    print_vs_bare(f"quiz: {CLIENTS} students x {n_req} requests ({len(questions)} questions), same gunicorn settings",
                  bare, "quiz page + answer", quiz)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
