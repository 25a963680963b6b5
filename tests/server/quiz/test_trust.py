"""Earned trust: a free-text verdict in a graded quiz counts without a teacher only where
its reader earned it from teachers' decisions; elsewhere it is provisional (the student sees the
suggestion at once, marked provisional; the gradebook counts it once a teacher confirms and shows
what waits), unless the course counts unconfirmed verdicts, marked so. Practice never waits."""
from __future__ import annotations

from coursework.quiz.bank import load_quiz
from server.extensions import db
from server.models import Course
from server.quiz import labels
from server.quiz.models import QuizAnswer, QuizAttempt, ReaderLabel
from tests.server.quiz.trust_helpers import earn_trust, graded_selftest

RIGHT = "数据并行解决吞吐，模型并行解决容量"  # selftest_1, read sure and fully right
POS0 = 0


def _start(client, quiz_id: str) -> int:
    resp = client.post(f"/quiz/{quiz_id}/start")
    assert resp.status_code == 302, resp.data[:300]
    return int(resp.headers["Location"].rstrip("/").split("/")[-1])


def _answer(client, attempt_id: int, pos: int, text: str) -> dict:
    resp = client.post(f"/quiz/attempt/{attempt_id}/answer/{pos}?lang=en", data={"answer": text},
                       headers={"Accept": "application/json"})
    assert resp.status_code == 200, resp.data[:300]
    return resp.get_json()


def _cell(app, username: str = "alice"):
    from server.scores.gradebook import build_gradebook

    with app.app_context():
        book = build_gradebook(db.session.scalar(db.select(Course)))
        return next(r for r in book.rows if r.username == username).cells.get("quiz:ch7_3_graded")


def test_without_earned_trust_a_right_answer_is_provisional_and_counts_once_confirmed(app, client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_graded")
    body = _answer(client, attempt_id, POS0, RIGHT)
    assert body["status"] == "needs_review" and body["score"] == 0
    assert "Provisional" in body["card_html"] and "suggests 1 / 1" in body["card_html"]
    assert "not yet earned" in body["card_html"]
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    cell = _cell(app)
    assert (cell.score, cell.waiting, cell.unconfirmed) == (0, 1, 0)
    auth.logout()
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    assert "1 waiting for a teacher" in page and "not counted until a teacher confirms them" in page
    review = client.get("/dashboard/DIST101/review/ch7_3/selftest_1?lang=en").get_data(as_text=True)
    ids = [int(x.split('"')[0]) for x in review.split('name="answer_id" value="')[1:]]
    client.post("/dashboard/DIST101/review/ch7_3/selftest_1/decide", data={"answer_id": ids, "verdict": "full"})
    cell = _cell(app)
    assert (cell.score, cell.waiting) == (1, 0)
    with app.app_context():  # the decision is a label: the rule reader agreed once
        label = db.session.scalar(db.select(ReaderLabel))
        assert label.item == "ch7_3/selftest_1" and label.decided == 1 and label.readings == {"rule": 1.0}
        (a,) = labels.agreement_table()
        assert (a.decided, a.agreed, a.earned()) == (1, 1, False) and a.needed() == 29
    readers = client.get("/dashboard/DIST101/readers?lang=en").get_data(as_text=True)
    assert "Self-test 1" in readers and "100.0%" in readers and "29 more agreeing decisions" in readers
    zh = client.get("/dashboard/DIST101/readers?lang=zh_CN").get_data(as_text=True)
    assert "一致" in zh


def test_earned_trust_counts_at_once_and_a_known_answer_is_decided_as_before(app, client, auth) -> None:
    with app.app_context():
        earn_trust("ch7_3/selftest_1")
        labels.record("ch7_3/selftest_2", "some answer a teacher already scored", 0.5, {"rule": 0.0}, "group", None, None)
        db.session.commit()
    auth.login()
    attempt_id = _start(client, "ch7_3_graded")
    body = _answer(client, attempt_id, POS0, RIGHT)
    assert body["status"] == "graded" and body["score"] == 1 and body["correct"]
    body = _answer(client, attempt_id, 1, "Some answer, a teacher already scored!")  # same normalised text
    assert body["status"] == "graded" and body["score"] == 0.5
    assert "already decided this same answer" in body["card_html"]


def test_trust_in_full_marks_does_not_let_a_zero_count(app, client, auth, monkeypatch) -> None:
    """A reader trusted for its full marks fails an answer: that zero is provisional, said as
    a suggestion; it counts at once only once the reader earned trust for its zeros too."""
    reversed_answer = "Data parallelism solves capacity, model parallelism solves throughput"
    with app.app_context():
        earn_trust("ch7_3/selftest_1", share=1.0)
    auth.login()
    attempt_id = _start(client, "ch7_3_graded")
    body = _answer(client, attempt_id, POS0, reversed_answer)
    assert body["status"] == "needs_review" and body["score"] == 0, body["status"]
    assert "Provisional" in body["card_html"] and "suggests 0 / 1" in body["card_html"]
    assert "Not correct" not in body["card_html"] and 'data-score="pending"' in body["card_html"]
    with app.app_context():  # what the page shows once feedback is released: suggestions, not verdicts
        stored = db.session.scalar(db.select(QuizAnswer))
        assert stored.details_json["provisional_reason"] == "untrusted"
        lines = [f["en"] for f in stored.feedback_json[1:]]
        assert lines and all(f.startswith("The reading suggests (a teacher will confirm): ") for f in lines), lines
        assert all(f["zh"].startswith("自动阅读认为（待老师确认）") for f in stored.feedback_json[1:])
        earn_trust("ch7_3/selftest_1", share=0.0)
    monkeypatch.setattr(load_quiz("ch7_3_graded"), "attempt_limit", None)
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    body = _answer(client, _start(client, "ch7_3_graded"), POS0, reversed_answer)
    assert body["status"] == "graded" and body["score"] == 0


def test_trust_is_never_earned_after_full_marks_to_an_answer_the_teacher_scored_zero(app) -> None:
    with app.app_context():
        earn_trust("ch7_3/selftest_1", n=200)
        assert "rule" in labels.trusted_readers("ch7_3/selftest_1")
        labels.record("ch7_3/selftest_1", "a wrong note in the right words", 0.0, {"rule": 1.0}, "group", None, None)
        db.session.commit()
        assert labels.trusted_readers("ch7_3/selftest_1") == set()
        (a,) = labels.agreement_table()
        assert a.full_to_zero == 1 and a.share > 0.99 and not a.earned()


def test_a_course_may_count_unconfirmed_verdicts_marked_so(app, client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_graded")
    _answer(client, attempt_id, POS0, RIGHT)
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    auth.logout()
    auth.login("teacher", "teacher-pass")
    client.post("/dashboard/DIST101/settings/unconfirmed", data={"count": "1"})
    cell = _cell(app)
    assert (cell.score, cell.waiting, cell.unconfirmed) == (1, 1, 1)
    page = client.get("/dashboard/DIST101/?lang=en").get_data(as_text=True)
    assert "1 points unconfirmed" in page and "counted now, marked unconfirmed" in page
    csv = client.get("/dashboard/DIST101/export/canvas.csv").get_data(as_text=True)
    # every export field is quoted (CSV-injection hardening): compare cells, not raw text
    assert "waiting for a teacher (unconfirmed points counted)" in csv.splitlines()[0] and ',"1 (1)"' in csv
    client.post("/dashboard/DIST101/settings/unconfirmed", data={"count": "0"})
    assert (_cell(app).score, _cell(app).unconfirmed) == (0, 0)
    client.post("/dashboard/DIST101/settings/unconfirmed", data={"count": "1"})
    auth.logout()
    auth.login()
    card = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert "This course counts it now, marked unconfirmed" in card
    overview = client.get("/quiz/ch7_3_graded/?lang=en").get_data(as_text=True)
    assert "1 free-text answer waits for a teacher: 1 of these points are unconfirmed" in overview
    assert "等待老师" in client.get("/quiz/ch7_3_graded/?lang=zh_CN").get_data(as_text=True)


def test_practice_never_waits_even_when_the_reading_is_unsure(app, client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")  # practice
    body = _answer(client, attempt_id, 3, "offload makes training faster because the CPU helps compute")
    assert body["status"] == "graded" and "Practice: this is the automatic reading" in body["card_html"]
    assert "Reference answer" in body["card_html"]
    # a reading unsure of itself is said as what it is, in both languages: never a bare "Not correct"
    assert "Probably" in body["card_html"] and "Not correct" not in body["card_html"], body["card_html"]
    zh = client.get(f"/quiz/attempt/{attempt_id}?lang=zh_CN").get_data(as_text=True)
    card = zh.split('id="q3"', 1)[1].split("</section>", 1)[0]
    assert "可能" in card and "正确" not in card.replace("可能部分正确", "").replace("可能不正确", ""), card
    with app.app_context():
        assert db.session.scalar(db.select(QuizAnswer.review_state)) is None


def test_the_graded_selftest_copy_helper_keeps_the_unsure_reason(app, client, auth, monkeypatch) -> None:
    graded_selftest(monkeypatch)
    with app.app_context():
        earn_trust("ch7_3/selftest_4")  # trust on the question does not count a reading unsure of itself
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    body = _answer(client, attempt_id, 3, "offload makes training faster because the CPU helps compute")
    assert body["status"] == "needs_review" and "was not sure it understood" in body["card_html"]
    with app.app_context():
        assert db.session.get(QuizAttempt, attempt_id).score == 0


def test_the_readers_page_names_the_kinds_of_verdict_that_count(app, client, auth) -> None:
    with app.app_context():
        earn_trust("ch7_3/selftest_1", share=1.0)
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/readers?lang=en").get_data(as_text=True)
    row = page.split('id="agreement"')[1]
    assert "Trust is earned separately for each kind of verdict" in page
    assert '<td class="kinds">full marks</td>' in row
    zh = client.get("/dashboard/DIST101/readers?lang=zh_CN").get_data(as_text=True)
    assert "信任按判定的种类分别积累" in zh and '<td class="kinds">满分</td>' in zh


def test_a_decided_answer_is_reused_only_for_the_same_claim(app, client, auth) -> None:
    """Text reuse compares answers without case, spaces and sentence punctuation, but an operator or
    a decimal point is part of what the answer claims: a teacher's 0.75 for 'full_shard ≠ ZeRO-3'
    is no decision on 'full_shard = ZeRO-3', which the reading finds fully right and which must wait
    for a teacher (no trust earned), never inherit a share below its own."""
    wrong_mapping = "ZeRO-1 shards optimizer states, ZeRO-2 also gradients, ZeRO-3 also parameters; full_shard ≠ ZeRO-3"
    right = wrong_mapping.replace("≠", "=")
    with app.app_context():
        labels.record("ch7_3/selftest_3", wrong_mapping, 0.75, {"rule": 0.75}, "group", None, None)
        db.session.commit()
        assert labels.known_decision("ch7_3/selftest_3", wrong_mapping.upper() + "!") == 0.75
        assert labels.known_decision("ch7_3/selftest_3", right) is None
        assert labels.known_decision("ch7_3/selftest_3", wrong_mapping.replace("ZeRO-2", "ZeRO 2")) is None
        labels.record("ch7_3/selftest_3", "full_shard = zero 3", 1.0, {"rule": 0.25}, "group", None, None)
        labels.record("ch7_3/selftest_3", "full_shard ≠ zero 3", 0.0, {"rule": 0.25}, "group", None, None)
        db.session.commit()  # one label (same hash), now about the second text only
        assert labels.known_decision("ch7_3/selftest_3", "full_shard = zero 3") is None
        assert labels.known_decision("ch7_3/selftest_3", "Full_shard ≠ ZeRO 3.") == 0.0
    auth.login()
    attempt_id = _start(client, "ch7_3_graded")
    body = _answer(client, attempt_id, 2, right)
    assert body["status"] == "needs_review" and "already decided" not in body["card_html"], body["status"]
