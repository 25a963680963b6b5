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

``--against CHECKOUT`` serves another checkout (a git worktree of an older commit) beside this
one, each on its own database and Redis number, and runs every phase against both in turn, the
order flipping from phase to phase, so a before/after comparison shares one run and one host load.
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import re
import tempfile
import urllib.parse
from pathlib import Path
from typing import NamedTuple

from bench.common import print_table, redis_server
from bench.loadgen import (TREE_ENV, LoadResult, Request, Server, gunicorn, prepare_database, print_vs_bare, run_load,
                           sql_statements)
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


class Measured(NamedTuple):
    answers: LoadResult
    pages: LoadResult
    no_js: LoadResult
    paced: LoadResult


def measure(servers: list[tuple[Server, dict[str, str], dict[str, int]]], questions: list[str]) -> list[Measured]:
    """Every phase against each server in turn (the order flips each phase, so a host whose load
    drifts favours neither), each server's students on their own database."""
    results: list[dict[str, LoadResult]] = [{} for _ in servers]
    attempts: list[list[Student]] = [[] for _ in servers]

    def turns(phase: int) -> list[int]:
        order = list(range(len(servers)))
        return order if phase % 2 == 0 else order[::-1]

    for i in turns(0):
        server, _, users = servers[i]
        attempts[i] = begin(server, users, 1)
    for i in turns(0):
        results[i]["answers"] = run_load(servers[i][0], lambda c: answer_requests(attempts[i][c], questions),
                                         clients=CLIENTS)
    for i in turns(1):
        results[i]["pages"] = run_load(servers[i][0], lambda c: [page_request(attempts[i][c])] * len(questions),
                                       clients=CLIENTS)
    for i in turns(0):
        attempts[i] = begin(servers[i][0], servers[i][2], 2, attempts[i])
    for i in turns(0):
        results[i]["no_js"] = run_load(servers[i][0], lambda c: [
            r for post in answer_requests(attempts[i][c], questions, as_json=False)
            for r in (post, page_request(attempts[i][c]))], clients=CLIENTS)
    for i in turns(1):
        attempts[i] = begin(servers[i][0], servers[i][2], 3, attempts[i])
    for i in turns(1):
        results[i]["paced"] = run_load(servers[i][0], lambda c: [page_request(attempts[i][c]),
                                                                  *answer_requests(attempts[i][c], questions)],
                                       clients=CLIENTS, think_s=THINK_S, deadline_s=120)
    for i, (server, env, users) in enumerate(servers):
        # statements per request, counted in the app on a fresh attempt of one student
        fourth = begin(server, dict(list(users.items())[:1]), 4, attempts[i][:1])[0]
        results[i]["answers"].sql_per_request = sql_statements(env, answer_requests(fourth, questions)[:9])
        results[i]["pages"].sql_per_request = sql_statements(env, [page_request(fourth)] * 3)
    return [Measured(**r) for r in results]


def report(label: str, bare: LoadResult, m: Measured, questions: list[str]) -> None:
    print_vs_bare(f"quiz{label}, saturated: {CLIENTS} students sending back to back, {len(questions)} questions "
                  "each, same gunicorn settings", bare,
                  [("answer (JSON, as the page posts it)", m.answers, True), ("quiz page (40 answered cards)", m.pages, True),
                   ("no-JavaScript flow (post + reload)", m.no_js, False)])
    paced = m.paced
    print_table(f"quiz{label}, paced: {CLIENTS} students, a page load then {len(questions)} answers, "
                f"{THINK_S:g} s (0.5-1.5x) between actions",
                ["traffic", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "SQL/req (page; answer)"],
                [["page + answers", paced.throughput, paced.p(50), paced.p(99), max(paced.latencies_ms, default=0),
                  paced.errors, f"{m.pages.sql_per_request:g}; {m.answers.sql_per_request:g}"]])
    ok = paced.p(99) < 100 and paced.errors == 0
    print(f"\n  goal: p99 < 100 ms at a class's pace -> {'ok' if ok else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", metavar="CHECKOUT",
                    help="another checkout of distgrade (e.g. a git worktree of an older commit), served beside "
                         "this one and measured in the same run, phase by phase")
    args = ap.parse_args(argv)
    questions = load_quiz(QUIZ).question_ids
    trees = [("", None)] + ([(f" [{args.against}]", str(Path(args.against).resolve()))] if args.against else [])
    with redis_server() as redis_url, contextlib.ExitStack() as stack:
        with gunicorn("bench.bare_app:app") as server:
            run_load(server, lambda i: [("GET", "/ping", None, {})] * 5, clients=CLIENTS)
            bare = run_load(server, lambda i: [("GET", "/ping", None, {})] * len(questions), clients=CLIENTS)
        servers = []
        for n, (_, tree) in enumerate(trees):
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            env = dict(os.environ, DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}", REDIS_URL=f"{redis_url[:-1]}{n}",
                       DISTGRADE_VAR_DIR=tmp, SECRET_KEY=SECRET_KEY)
            if tree:
                env[TREE_ENV] = tree
            users = enrol_students(env)
            servers.append((stack.enter_context(gunicorn("server.wsgi:app", env)), env, users))
        measured = measure(servers, questions)
    for (label, _), m in zip(trees, measured):
        report(label or (" [this checkout]" if args.against else ""), bare, m, questions)
    if args.against:
        new, old = measured
        rows = [[name, getattr(old, f).throughput, getattr(new, f).throughput,
                 f"{getattr(new, f).throughput / getattr(old, f).throughput:.2f}x" if getattr(old, f).throughput else "",
                 getattr(old, f).p(99), getattr(new, f).p(99),
                 f"{getattr(old, f).server_cpu_ms_per_request:.2f}", f"{getattr(new, f).server_cpu_ms_per_request:.2f}"]
                for name, f in (("answer (JSON)", "answers"), ("quiz page", "pages"), ("no-JavaScript flow", "no_js"),
                                ("paced page + answers", "paced"))]
        print_table(f"this checkout against {args.against}, same run", ["traffic", "req/s before", "req/s now",
                    "now/before", "p99 ms before", "p99 ms now", "server CPU ms/req before",
                    "now"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
