"""The quiz's hot requests run a fixed number of SQL statements, however many questions are
answered and however many attempts the student made: a statement per card or per answer (a
loop of queries) shows here as a count that grows with the answers.

The page is counted with its rendered cards cached (the common reload) and with the cache
emptied (a restarted process, or an attempt answered through the other worker): then every
stored answer is read, and must be read in one statement, not one per card.
"""
from __future__ import annotations

from urllib.parse import urlencode

from sqlalchemy import event

from coursework.quiz.bank import load_quiz
from server.extensions import db
from server.quiz import attempts
from server.quiz.models import QuizAttempt

QUIZ = "ch7_3_practice"  # 40 questions of every type


def _count(app, fn) -> int:
    n = [0]
    with app.app_context():
        engine = db.engine

    def count(*_args):
        n[0] += 1
    event.listen(engine, "before_cursor_execute", count)
    try:
        fn()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return n[0]


def _form(app, attempt_id: int, pos: int) -> str:
    """The reference answer of the attempt's question ``pos``, posted as the page's form would."""
    with app.test_request_context("/"):
        att = db.session.get(QuizAttempt, attempt_id)
        v = attempts.variant_for(att, att.question_ids[pos])
    ref, qtype = v.reference("en"), v.question.type
    if qtype in ("single", "multiple"):
        fields = [("choice", i) for i in ref.split(",")]
    elif qtype == "ordering":
        fields = [(f"pos_{i}", str(n + 1)) for n, i in enumerate(ref.split(","))]
    else:
        fields = [("answer", ref)]
    return urlencode(fields)


def _answer(app, client, path: str, pos: int) -> int:
    """Statements of one answer post (stored: HTTP 200)."""
    attempt_id = int(path.rstrip("/").split("/")[-1])
    body = _form(app, attempt_id, pos)

    def post():
        resp = client.post(f"{path}/answer/{pos}?lang=en", data=body, headers={
            "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"})
        assert resp.status_code == 200, resp.data[:300]
    return _count(app, post)


def _page(app, client, path: str, cold: bool) -> int:
    if cold:
        app.extensions.pop("quiz_pages", None)  # every rendered card and page shell forgotten

    def get():
        assert client.get(path).status_code == 200
    return _count(app, get)


def test_the_page_and_an_answer_cost_the_same_statements_with_one_answer_or_forty(app, client, auth) -> None:
    auth.login()
    n = len(load_quiz(QUIZ).question_ids)
    assert n >= 30
    path = client.post(f"/quiz/{QUIZ}/start").headers["Location"]
    client.get(path)
    first_answer = _answer(app, client, path, 0)
    one = {"cold": _page(app, client, path, cold=True), "warm": _page(app, client, path, cold=False)}
    for pos in range(1, n - 1):
        _answer(app, client, path, pos)
    last_answer = _answer(app, client, path, n - 1)
    forty = {"cold": _page(app, client, path, cold=True), "warm": _page(app, client, path, cold=False)}
    assert forty == one, (one, forty)
    assert one["warm"] == 1  # the attempt row, with the session check and the answers' states
    # and every stored answer not rendered yet, in one statement; the page shell (rendered once per
    # attempt) loads the signed-in user and their memberships for the navigation
    assert one["cold"] <= 4
    assert last_answer == first_answer, (first_answer, last_answer)


def test_a_later_attempt_costs_what_the_first_did(app, client, auth) -> None:
    auth.login()
    counts = []
    for _ in range(3):
        path = client.post(f"/quiz/{QUIZ}/start").headers["Location"]
        client.get(path)
        answer = _answer(app, client, path, 0)
        counts.append((answer, _page(app, client, path, cold=True), _page(app, client, path, cold=False)))
        assert client.post(f"{path}/finish").status_code == 302
    assert counts[0] == counts[1] == counts[2], counts
