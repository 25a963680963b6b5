"""Quiz page and answer submission under 50 concurrent simulated students on gunicorn, against a
bare Flask endpoint on the same server settings. Bounded loops on 127.0.0.1; stops by itself.

Each student logs in and works through practice attempts of the 40-question bank, always
posting the reference answer of its own variant, so every post is graded and stored.

Saturated (clients send back to back; throughput against the bare endpoint):
* answer: every question posted in the background (JSON), as the page's script does;
* quiz page: reloads of the attempt page with all 40 cards answered;
* no-JavaScript flow (for reference): plain form posts, each followed by a reload of the page.

Paced: the same students load their page and answer all 40 questions, each pausing
0.5-1.5x ``BENCH_THINK_S`` (default 0.5 s, ten times faster than anyone reads and answers)
before every request; p99 latency is what a class would feel.
"""
from __future__ import annotations

import http.client
import os
import re
import tempfile
import urllib.parse
from pathlib import Path
from typing import NamedTuple

from bench.common import print_table, redis_server
from bench.loadgen import Request, Server, gunicorn, prepare_database, print_vs_bare, run_load, sql_statements
from bench.web_status import login_cookie
from coursework.quiz.bank import load_question, load_quiz
from coursework.quiz.grading import make_variant
from coursework.quiz.seeds import seed_key, variant_seed

CLIENTS = int(os.environ.get("BENCH_CLIENTS", "50"))
QUIZ = "ch7_3_practice"
THINK_S = float(os.environ.get("BENCH_THINK_S", "0.5"))
# The bench server's key: seeds are an HMAC under it, so the simulated students need it to answer.
SECRET_KEY = "bench-only-secret-key-0123456789"


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


def answer_body(user_id: int, qid: str, token: str, attempt_no: int = 1) -> bytes:
    """The form a browser would post for this student's variant, with the reference answer."""
    v = make_variant(load_question(qid), variant_seed(user_id, qid, attempt_no, key=seed_key(SECRET_KEY), quiz=QUIZ))
    ref, qtype = v.reference("en"), v.question.type
    if qtype in ("single", "multiple"):
        fields = [("choice", i) for i in ref.split(",")]
    elif qtype == "ordering":
        fields = [(f"pos_{i}", str(n + 1)) for n, i in enumerate(ref.split(","))]
    else:
        fields = [("answer", ref)]
    return urllib.parse.urlencode(fields + [("csrf_token", token)]).encode()


def finish(port: int, cookie: str, path: str, token: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", f"{path}/finish", body=urllib.parse.urlencode({"csrf_token": token}),
                 headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"})
    conn.getresponse().read()


class Student(NamedTuple):
    user_id: int
    cookie: str
    path: str  # the attempt page
    token: str  # CSRF token
    attempt_no: int


def begin(server: Server, users: dict[str, int], attempt_no: int, previous: list[Student] | None = None) -> list[Student]:
    """Every student (logged in the first time) finishes its previous attempt and starts the next."""
    students = []
    for n, (name, uid) in enumerate(users.items()):
        if previous:
            cookie = previous[n].cookie
            finish(server.port, cookie, previous[n].path, previous[n].token)
        else:
            cookie = login_cookie(server.port, name, "pw")
        students.append(Student(uid, cookie, *start_attempt(server.port, cookie), attempt_no))
    return students


def answer_requests(s: Student, questions: list[str], as_json: bool = True) -> list[Request]:
    headers = {"Cookie": s.cookie, "Content-Type": "application/x-www-form-urlencoded"}
    if as_json:
        headers["Accept"] = "application/json"
    return [("POST", f"{s.path}/answer/{pos}", answer_body(s.user_id, qid, s.token, s.attempt_no), headers)
            for pos, qid in enumerate(questions)]


def page_request(s: Student) -> Request:
    return ("GET", s.path, None, {"Cookie": s.cookie})


def main() -> int:
    questions = load_quiz(QUIZ).question_ids
    with tempfile.TemporaryDirectory() as tmp, redis_server() as redis_url:
        env = dict(os.environ, DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}", REDIS_URL=redis_url,
                   DISTGRADE_VAR_DIR=tmp, SECRET_KEY=SECRET_KEY)
        users = enrol_students(env)
        with gunicorn("bench.bare_app:app") as server:
            run_load(server, lambda i: [("GET", "/ping", None, {})] * 5, clients=CLIENTS)
            bare = run_load(server, lambda i: [("GET", "/ping", None, {})] * len(questions), clients=CLIENTS)
        with gunicorn("server.wsgi:app", env) as server:
            first = begin(server, users, 1)
            answers = run_load(server, lambda i: answer_requests(first[i], questions), clients=CLIENTS)
            pages = run_load(server, lambda i: [page_request(first[i])] * len(questions), clients=CLIENTS)
            second = begin(server, users, 2, first)
            no_js = run_load(server, lambda i: [r for post in answer_requests(second[i], questions, as_json=False)
                                                for r in (post, page_request(second[i]))], clients=CLIENTS)
            third = begin(server, users, 3, second)
            paced = run_load(server, lambda i: [page_request(third[i]), *answer_requests(third[i], questions)],
                             clients=CLIENTS, think_s=THINK_S, deadline_s=120)
            # statements per request, counted in the app on a fresh attempt of one student
            fourth = begin(server, dict(list(users.items())[:1]), 4, third[:1])[0]
            answers.sql_per_request = sql_statements(env, answer_requests(fourth, questions)[:9])
            pages.sql_per_request = sql_statements(env, [page_request(fourth)] * 3)
    print_vs_bare(f"quiz, saturated: {CLIENTS} students sending back to back, {len(questions)} questions each, "
                  "same gunicorn settings", bare,
                  [("answer (JSON, as the page posts it)", answers, True), ("quiz page (40 answered cards)", pages, True),
                   ("no-JavaScript flow (post + reload)", no_js, False)])
    print_table(f"quiz, paced: {CLIENTS} students, a page load then {len(questions)} answers, "
                f"{THINK_S:g} s (0.5-1.5x) between actions",
                ["traffic", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "SQL/req (page; answer)"],
                [["page + answers", paced.throughput, paced.p(50), paced.p(99), max(paced.latencies_ms), paced.errors,
                  f"{pages.sql_per_request:g}; {answers.sql_per_request:g}"]])
    ok = paced.p(99) < 100 and paced.errors == 0
    print(f"\n  goal: p99 < 100 ms at a class's pace -> {'ok' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
