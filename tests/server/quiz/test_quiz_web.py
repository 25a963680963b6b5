"""Quiz pages over the Flask test client on a migrated database: attempts, instant feedback,
format errors that use nothing, graded-mode limits, results, the CLI grader."""
from __future__ import annotations

import json

import pytest

from coursework.quiz.bank import load_question, load_quiz
from server.extensions import db
from server.quiz.attempts import variant_for
from server.quiz.models import QuizAnswer, QuizAttempt


def _start(client, quiz_id: str) -> int:
    resp = client.post(f"/quiz/{quiz_id}/start")
    assert resp.status_code == 302, resp.data[:300]
    return int(resp.headers["Location"].rstrip("/").split("/")[-1])


def _answer(client, attempt_id: int, pos: int, **form) -> tuple[int, dict]:
    resp = client.post(f"/quiz/attempt/{attempt_id}/answer/{pos}", data=form, headers={"Accept": "application/json"})
    return resp.status_code, resp.get_json()


def test_quiz_list_and_overview(client, auth) -> None:
    auth.login()
    page = client.get("/quiz/?lang=en").get_data(as_text=True)
    assert "7.3 self-test" in page and "Practice" in page
    assert "自测" in client.get("/quiz/ch7_3_selftest/?lang=zh_CN").get_data(as_text=True)


def test_anonymous_is_sent_to_login(client) -> None:
    assert client.get("/quiz/").status_code in (302, 401)


@pytest.fixture
def graded_quiz_closed(monkeypatch):
    """The graded quiz has closed: the practice bank shows the references of its questions too
    (before that they are held: tests/server/quiz/test_graded_secrecy.py)."""
    monkeypatch.setattr(load_quiz("ch7_3_graded"), "closes_at", "2020-01-01T00:00:00")


def test_self_test_end_to_end_with_instant_feedback(app, client, auth, graded_quiz_closed) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    code, body = _answer(client, attempt_id, 0, answer="数据并行解决吞吐，模型并行解决容量")
    assert code == 200 and body["correct"] and body["explanation"]
    code, body = _answer(client, attempt_id, 1, answer="等价于单卡大 batch，前提是梯度同步。")
    assert code == 200 and 0 < body["score"] < body["max_score"] and any("DistributedSampler" in f for f in body["feedback"])
    code, body = _answer(client, attempt_id, 1, answer="again")
    assert code == 409  # one graded answer per question and attempt
    page = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert "Reference answer" in page and "Partly correct" in page
    resp = client.post(f"/quiz/attempt/{attempt_id}/finish")
    results = client.get(resp.headers["Location"] + "?lang=en").get_data(as_text=True)
    assert 'id="final-score">1.67<' in results  # stored 1.6667; pages show two decimals (coursework.text.score_text)
    assert "§2 DDP" in results and "§1" not in results.split("Sections to reread")[1].split("</ul>")[0]
    with app.app_context():
        answers = db.session.scalars(db.select(QuizAnswer).order_by(QuizAnswer.position)).all()
        assert [a.question_id for a in answers] == ["ch7_3/selftest_1", "ch7_3/selftest_2"]
        assert answers[1].details_json["missing"] == ["data_split"] and answers[1].seed > 0
        assert answers[0].raw_answer.startswith("数据并行")


def test_format_error_uses_no_attempt_and_html_shows_it(app, client, auth) -> None:
    auth.login()
    quiz = load_quiz("ch7_3_practice")
    pos = quiz.question_ids.index("ch7_3/memory/full_training")
    attempt_id = _start(client, "ch7_3_practice")
    for bad in ("", "NaN", "x" * 10_000, "112 ms"):
        code, body = _answer(client, attempt_id, pos, answer=bad)
        assert code == 422 and body["status"] == "format_error", bad
    resp = client.post(f"/quiz/attempt/{attempt_id}/answer/{pos}?lang=en", data={"answer": "12 parsecs"})
    assert resp.status_code == 422 and b'role="alert"' in resp.data and b"12 parsecs" in resp.data
    with app.app_context():
        att = db.session.get(QuizAttempt, attempt_id)
        v = variant_for(att, "ch7_3/memory/full_training")
    code, body = _answer(client, attempt_id, pos, answer=f"{v.answer / 2 ** 30:.4g} GB")
    assert code == 200 and body["score"] == 0 and "GiB" in " ".join(body["feedback"])
    with app.app_context():
        row = db.session.scalar(db.select(QuizAnswer))
        assert row.format_errors == 5 and row.details_json["unit_confusion"]


def test_choice_and_ordering_forms(app, client, auth, monkeypatch) -> None:
    # these fixed-text questions are also in the graded quiz; practice judges them once it closed
    # (while it is open they are recorded unjudged: tests/server/quiz/test_graded_secrecy.py)
    monkeypatch.setattr(load_quiz("ch7_3_graded"), "closes_at", "2020-01-01T00:00:00")
    auth.login()
    quiz = load_quiz("ch7_3_practice")
    attempt_id = _start(client, "ch7_3_practice")
    pos = quiz.question_ids.index("ch7_3/ddp/checklist")
    code, body = _answer(client, attempt_id, pos, choice=["sampler", "rank0", "syncbn", "lr"])
    assert code == 200 and body["correct"]
    pos = quiz.question_ids.index("ch7_3/ddp/step_order")
    card = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True).split(f'id="q{pos}"')[1].split("</section>")[0]
    assert card.count('<option value="" selected>') == 5  # no order is preselected
    code, body = _answer(client, attempt_id, pos, **{f"pos_{i}": "" for i in ["split", "forward", "backward", "allreduce", "update"]})
    assert code == 422 and body["status"] == "format_error"  # submitted unchanged: the question is not used up
    order = ["split", "forward", "backward", "allreduce", "update"]
    code, body = _answer(client, attempt_id, pos, **{f"pos_{i}": str(n + 1) for n, i in enumerate(order)})
    assert code == 200 and body["correct"]


def test_practice_gives_new_variants_each_attempt(app, client, auth) -> None:
    auth.login()
    seeds = set()
    for _ in range(3):
        attempt_id = _start(client, "ch7_3_practice")
        with app.app_context():
            att = db.session.get(QuizAttempt, attempt_id)
            seeds.add(variant_for(att, "ch7_3/memory/zero_per_card").seed)
        client.post(f"/quiz/attempt/{attempt_id}/finish")
    assert len(seeds) == 3


def test_graded_mode_limits_attempts_and_counts_best(app, client, auth) -> None:
    from tests.server.quiz.trust_helpers import earn_trust

    with app.app_context():
        earn_trust("ch7_3/selftest_1")  # free text counts at once only where its reading earned trust
    auth.login()
    quiz = load_quiz("ch7_3_graded")
    for n in range(quiz.attempt_limit):
        attempt_id = _start(client, "ch7_3_graded")
        if n == 1:
            _answer(client, attempt_id, 0, answer="吞吐/容量")
        client.post(f"/quiz/attempt/{attempt_id}/finish")
    resp = client.post("/quiz/ch7_3_graded/start")
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/quiz/ch7_3_graded/")
    assert "all attempts" in client.get("/quiz/ch7_3_graded/?lang=en").get_data(as_text=True)
    with app.app_context():
        from server.scores.gradebook import build_gradebook
        from server.models import Course

        att = db.session.scalar(db.select(QuizAttempt))
        book = build_gradebook(db.session.get(Course, att.course_id), att.user_id)
        cell = book.rows[0].cells["quiz:ch7_3_graded"]  # the one score the quiz pages show
        assert (cell.score, book.item("quiz:ch7_3_graded").max_score) == (1.0, quiz_max(quiz))


def quiz_max(quiz) -> float:
    return sum(load_question(q).points for q in quiz.question_ids)


def test_other_students_attempts_are_404(client, auth) -> None:
    auth.login("alice", "alice-pass")
    attempt_id = _start(client, "ch7_3_selftest")
    auth.logout()
    auth.login("bob", "bob-pass")
    assert client.get(f"/quiz/attempt/{attempt_id}").status_code == 404
    assert _answer(client, attempt_id, 0, answer="x")[0] == 404


def test_cli_grades_one_answer(app) -> None:
    runner = app.test_cli_runner()
    out = runner.invoke(args=["quiz", "grade", "ch7_3/selftest_1", "--answer",
                              "data parallel solves capacity, model parallel solves throughput"])
    body = json.loads(out.output)
    assert body["score"] == 0 and body["max_score"] == 1 and body["feedback"]
    out = runner.invoke(args=["quiz", "grade", "ch7_3/selftest_6", "--answer", "没有用 DistributedSampler，每卡吃全量数据", "--seed", "5"])
    body = json.loads(out.output)
    assert body["score"] == body["max_score"] == 1


def test_form_post_without_javascript_redirects_to_the_graded_page(client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    resp = client.post(f"/quiz/attempt/{attempt_id}/answer/0?lang=en", data={"answer": "throughput; capacity"})
    assert resp.status_code == 302 and resp.headers["Location"].endswith(f"/quiz/attempt/{attempt_id}#q0")
    page = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    card = page.split('id="q0"')[1].split("</section>")[0]
    assert "Your answer" in card and "throughput; capacity" in card
    assert 'class="qform"' not in card and 'name="answer"' not in card  # no answer form (only "ask a teacher")
    assert page.count('class="qform"') == 5  # the other five questions still have their forms


def test_json_answer_returns_the_card_the_page_shows(client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    client.get(f"/quiz/attempt/{attempt_id}?lang=en")  # the open cards are rendered and kept
    code, body = _answer(client, attempt_id, 0, answer="数据并行解决吞吐，模型并行解决容量")
    assert code == 200 and body["attempt_score"] == 1
    assert body["card_html"].startswith('<section class="card quizq" id="q0"') and 'class="qform"' not in body["card_html"]
    page = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert body["card_html"] in page
    assert 'id="attempt-score">1</strong>' in page
    client.get(f"/quiz/attempt/{attempt_id}?lang=zh_CN")
    zh = client.get(f"/quiz/attempt/{attempt_id}").get_data(as_text=True)
    assert "参考答案" in zh and "Reference answer" not in zh  # cached pieces are per language


def test_answers_after_finish_or_twice_are_refused_and_not_counted(app, client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    assert _answer(client, attempt_id, 0, answer="吞吐/容量")[0] == 200
    code, body = _answer(client, attempt_id, 0, answer="吞吐/容量")
    assert code == 409 and body["error"] == "already_answered"
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    code, body = _answer(client, attempt_id, 1, answer="等价于单卡大 batch，前提是数据切分且梯度同步")
    assert code == 409 and body["error"] == "attempt_closed"
    with app.app_context():
        att = db.session.get(QuizAttempt, attempt_id)
        assert att.score == 1 and [a.position for a in att.answers] == [0]


def test_finished_page_shows_unanswered_cards_without_forms(client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    open_page = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert open_page.count('class="qform"') == 6 and 'id="finish-quiz"' in open_page
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    done = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert 'class="qform"' not in done and done.count("Not answered.") == 6 and 'id="finish-quiz"' not in done


def test_flashed_refusal_shows_once_and_does_not_stick_to_the_cached_page(client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    client.get(f"/quiz/attempt/{attempt_id}?lang=en")  # the page shell is cached now
    client.post(f"/quiz/attempt/{attempt_id}/answer/0?lang=en", data={"answer": "throughput; capacity"})
    resp = client.post(f"/quiz/attempt/{attempt_id}/answer/0?lang=en", data={"answer": "again"})
    assert resp.status_code == 302  # without JavaScript a refusal is flashed on the page
    assert "You already answered this question." in client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert "You already answered this question." not in client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)


def test_attempt_pages_need_a_login(client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    auth.logout()
    resp = client.get(f"/quiz/attempt/{attempt_id}")
    assert resp.status_code == 302 and "/login" in resp.headers["Location"]
    assert client.post(f"/quiz/attempt/{attempt_id}/answer/0", data={"answer": "x"}).status_code in (302, 400)


def test_a_fresh_process_renders_stored_answers_identically(app, client, auth) -> None:
    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    cards = [_answer(client, attempt_id, pos, answer=text)[1]["card_html"]
             for pos, text in ((0, "吞吐/容量"), (3, "用速度换显存"))]
    app.extensions.pop("quiz_pages")  # as if another worker (or a restarted one) served the page
    page = client.get(f"/quiz/attempt/{attempt_id}").get_data(as_text=True)
    assert all(card in page for card in cards) and page.count('class="qform"') == 4


def test_finish_racing_answers_in_other_tabs_keeps_score_and_answers_consistent(app, client, auth) -> None:
    import threading
    import time

    auth.login()
    quiz = load_quiz("ch7_3_practice")
    attempt_id = _start(client, "ch7_3_practice")
    with app.app_context():
        att = db.session.get(QuizAttempt, attempt_id)
        refs = {pos: variant_for(att, qid) for pos, qid in enumerate(quiz.question_ids)}
    numeric = [pos for pos, v in refs.items() if v.question.type == "numeric"]
    codes: list[int] = []
    sent: list[tuple[float, int]] = []  # (when the request started, its status)
    some_stored = threading.Event()
    tabs = []
    for _ in range(3):  # other tabs: their own sessions, the same student
        tabs.append(app.test_client())
        tabs[-1].post("/login", data={"username": "alice", "password": "alice-pass"})

    def answer_in(tab_client, positions: list[int]) -> None:
        for pos in positions:
            started = time.monotonic()
            code = _answer(tab_client, attempt_id, pos, answer=refs[pos].reference("en"))[0]
            codes.append(code)
            sent.append((started, code))
            if codes.count(200) >= 2:
                some_stored.set()

    threads = [threading.Thread(target=answer_in, args=(c, numeric[i::3])) for i, c in enumerate(tabs)]
    for t in threads:
        t.start()
    assert some_stored.wait(30)
    client.post(f"/quiz/attempt/{attempt_id}/finish")  # while the other tabs are still answering
    finished = time.monotonic()
    for t in threads:
        t.join()
    assert all(code == 409 for started, code in sent if started > finished)  # none lands after Finish
    assert set(codes) <= {200, 409} and len(codes) == len(numeric)
    with app.app_context():
        att = db.session.get(QuizAttempt, attempt_id)
        stored = att.answers
        assert att.status == "submitted" and len(stored) == codes.count(200)
        assert att.score == round(sum(a.score for a in stored), 4)  # every stored answer counted once


def test_finish_counts_an_answer_stored_after_finish_read_the_attempt(app, client, auth) -> None:
    from server.quiz.attempts import finish_attempt

    auth.login()
    attempt_id = _start(client, "ch7_3_selftest")
    with app.app_context():
        att = db.session.get(QuizAttempt, attempt_id)
        assert att.answers == []  # the Finish request has read the attempt ...
        assert _answer(client, attempt_id, 0, answer="吞吐/容量")[0] == 200  # ... when another tab stores one
        finish_attempt(att)
        assert (att.status, att.score, len(att.answers)) == ("submitted", 1, 1)
    assert _answer(client, attempt_id, 1, answer="等价于大 batch")[1]["error"] == "attempt_closed"


def test_pages_show_option_text_units_and_progress(app, client, auth, graded_quiz_closed) -> None:
    """Reference answers show option text (never ids), times as "about 2.2 ms"; a bare number
    where the unit matters is a format error naming a unit of the right kind; the page has a
    jump list and asks before finishing with questions left open."""
    auth.login()
    quiz = load_quiz("ch7_3_practice")
    attempt_id = _start(client, "ch7_3_practice")
    page = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert page.count('data-pos="') == len(quiz.question_ids) and 'id="quiz-progress"' in page
    assert "unanswered." in page and "Finish anyway?" in page
    pos = quiz.question_ids.index("ch7_3/ddp/checklist")
    code, body = _answer(client, attempt_id, pos, choice=["sampler"])
    assert "DistributedSampler, with set_epoch every epoch" in body["reference"] and "rank0" not in body["reference"]
    assert "rank0," not in body["card_html"] and "Log, save and evaluate on rank 0 only" in body["card_html"]
    pos = quiz.question_ids.index("ch7_3/comm/allreduce_time")
    code, body = _answer(client, attempt_id, pos, answer="2.2 GB")  # a unit of the wrong kind: the kind is named
    assert code == 422 and body["status"] == "format_error"
    assert "a time" in " ".join(body["feedback"]) and "秒" in " ".join(body["feedback"])
    with app.app_context():
        variant = variant_for(db.session.get(QuizAttempt, attempt_id), "ch7_3/comm/allreduce_time")
    code, body = _answer(client, attempt_id, pos, answer=variant.reference("en"))
    assert code == 200 and body["correct"] and body["reference"].startswith("about ") and body["reference"][-2:] in ("ms", " s")
    zh = client.get(f"/quiz/attempt/{attempt_id}?lang=zh_CN").get_data(as_text=True)
    assert "仍要交卷吗" in zh and "约 " in zh


def test_the_students_quiz_pages_show_the_teachers_override_and_its_reason(app, client, auth) -> None:
    """The gradebook counts an override; the student's quiz list and overview say so, with the reason
    (the same counted score as the homework pages)."""
    from server.scores.actions import set_override
    from server.models import Course, User

    auth.login()
    attempt_id = _start(client, "ch7_3_graded")
    _answer(client, attempt_id, 0, answer="吞吐/容量")
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    quiz = load_quiz("ch7_3_graded")
    with app.app_context():
        alice = db.session.scalar(db.select(User).where(User.username == "alice"))
        teacher = db.session.scalar(db.select(User).where(User.username == "teacher"))
        course = db.session.scalar(db.select(Course))
        set_override(course.id, alice.id, "quiz:ch7_3_graded", 7, "oral exam instead", teacher.id,
                     computed=1.0, top=quiz_max(quiz))
    for url in ("/quiz/?lang=en", "/quiz/ch7_3_graded/?lang=en"):
        page = client.get(url).get_data(as_text=True)
        assert "7 / " in page and "oral exam instead" in page, url
    assert "oral exam instead" in client.get("/quiz/?lang=zh_CN").get_data(as_text=True)
