"""The language-model reader end to end: a graded free-text answer is read by the rule
reader and by the course's model behind a local chat-completions server; where the two disagree
or the model gives no reading the answer waits for the teacher; the teacher's decision is a label
for both readers, so the agreement table shows both; the model earns trust like the rule reader."""
from __future__ import annotations

import pytest

from server.extensions import db
from server.quiz import labels
from server.quiz.models import QuizAnswer, ReaderLabel
from tests.coursework.quiz.llm_server import ProtocolServer
from tests.server.quiz.trust_helpers import earn_trust

RIGHT = "数据并行解决吞吐，模型并行解决容量"


@pytest.fixture
def model(monkeypatch):
    with ProtocolServer(slow_s=2.0) as s:
        monkeypatch.setenv("DISTGRADE_LLM_URL", s.url)
        monkeypatch.setenv("DISTGRADE_LLM_MODEL", "served-model")
        monkeypatch.setenv("DISTGRADE_LLM_TIMEOUT_S", "0.5")
        monkeypatch.setenv("DISTGRADE_LLM_RPS", "1000")
        yield s


def _answer(client, text: str, pos: int = 0) -> dict:
    resp = client.post("/quiz/ch7_3_graded/start")
    attempt_id = int(resp.headers["Location"].rstrip("/").split("/")[-1])
    body = client.post(f"/quiz/attempt/{attempt_id}/answer/{pos}?lang=en", data={"answer": text},
                       headers={"Accept": "application/json"}).get_json()
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    return body


def test_both_readers_agree_and_the_decision_labels_both(app, client, auth, model) -> None:
    auth.login()
    body = _answer(client, RIGHT)
    assert body["status"] == "needs_review" and "not yet earned" in body["card_html"]
    assert len(model.requests) == 1 and "alice" not in str(model.requests[0])  # no name is sent
    with app.app_context():
        ans = db.session.scalar(db.select(QuizAnswer))
        assert ans.details_json["readings"] == {"rule": 1.0, "llm": 1.0}
    auth.logout()
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/review/ch7_3/selftest_1?lang=en").get_data(as_text=True)
    ids = [int(x.split('"')[0]) for x in page.split('name="answer_id" value="')[1:]]
    client.post("/dashboard/DIST101/review/ch7_3/selftest_1/decide", data={"answer_id": ids, "verdict": "zero"})
    with app.app_context():
        assert db.session.scalar(db.select(ReaderLabel.readings)) == {"rule": 1.0, "llm": 1.0}
    table = client.get("/dashboard/DIST101/readers?lang=en").get_data(as_text=True)
    assert "language model" in table and "rules" in table and "it gave full marks to an answer a teacher scored 0" in table
    zh = client.get("/dashboard/DIST101/readers?lang=zh_CN").get_data(as_text=True)
    assert "语言模型" in zh


def test_disagreement_or_no_reading_leaves_the_answer_to_the_teacher(app, client, auth, model, monkeypatch) -> None:
    from coursework.quiz.bank import load_quiz

    monkeypatch.setattr(load_quiz("ch7_3_graded"), "attempt_limit", None)  # one attempt per answer below
    with app.app_context():
        earn_trust("ch7_3/selftest_1", reader="rule")
        earn_trust("ch7_3/selftest_1", reader="llm")
    auth.login()
    assert _answer(client, RIGHT)["status"] == "graded"  # both trusted, both agree: counted at once
    body = _answer(client, "WRONG " + RIGHT)  # the model reads every item contradicted
    assert body["status"] == "needs_review" and "disagree" in body["card_html"]
    for marker in ("SLOW ", "GARBLED ", "BADQUOTE "):
        body = _answer(client, marker + RIGHT)
        assert body["status"] == "needs_review", marker
    with app.app_context():
        reasons = [a.details_json.get("provisional_reason") for a in db.session.scalars(db.select(QuizAnswer))]
        assert reasons == [None, "disagree", "no_reading", "no_reading", "no_reading"]
        assert "llm" in labels.trusted_readers("ch7_3/selftest_1")
