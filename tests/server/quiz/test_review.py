"""Free-text answers a teacher confirms: an unsure reading waits for the teacher and
scores nothing; similar answers of several students are one group and one decision grades them
all, their attempts and the gradebook; a student may ask for a review of an auto-graded answer once."""
from __future__ import annotations

import json

from server.extensions import db
from server.models import Course, Role
from server.quiz.models import QuizAnswer, QuizAttempt, QuizReviewDecision
from server.roster import enrol
from tests.server.quiz.trust_helpers import earn_trust, graded_selftest
from tests.server.test_postgres import postgres_url  # noqa: F401  (fixture)

UNSURE = "offload makes training faster because the CPU helps compute"  # rubric: confidence 0.6
UNSURE_TOO = "Offload makes training faster, because the CPU helps compute!"  # the same reading
POS = 3  # ch7_3/selftest_4 in the self-test


def _gradebook_quiz_cell(att, quiz_id: str) -> tuple[float, float]:
    """(score, max) of the student's gradebook cell for ``quiz_id`` (the quiz pages' one source)."""
    from server.scores.gradebook import build_gradebook

    book = build_gradebook(db.session.get(Course, att.course_id), att.user_id)
    return book.rows[0].cells[f"quiz:{quiz_id}"].score, book.item(f"quiz:{quiz_id}").max_score


def _start(client, quiz_id: str) -> int:
    resp = client.post(f"/quiz/{quiz_id}/start")
    assert resp.status_code == 302, resp.data[:300]
    return int(resp.headers["Location"].rstrip("/").split("/")[-1])


def _answer(client, attempt_id: int, pos: int, text: str) -> tuple[int, dict]:
    resp = client.post(f"/quiz/attempt/{attempt_id}/answer/{pos}?lang=en", data={"answer": text},
                       headers={"Accept": "application/json"})
    return resp.status_code, resp.get_json()


def _student_answers(app, client, auth, users: list[tuple[str, str, str]]) -> dict[str, int]:
    attempts = {}
    for name, pw, text in users:
        auth.login(name, pw)
        attempt_id = _start(client, "ch7_3_selftest")
        code, body = _answer(client, attempt_id, POS, text)
        assert code == 200 and body["status"] == "needs_review" and body["needs_review"], body
        assert body["score"] == 0 and "Waiting for the teacher" in body["card_html"]
        card = body["card_html"]
        assert "Provisional" in card and "suggests" in card and "It counts once a teacher confirms it." in card
        assert "was not sure it understood" in card
        _answer(client, attempt_id, 0, "数据并行解决吞吐，模型并行解决容量")  # graded at once: 1 point
        client.post(f"/quiz/attempt/{attempt_id}/finish")
        attempts[name] = attempt_id
        auth.logout()
    return attempts


def test_a_grouped_decision_grades_every_similar_answer_and_the_attempts(app, client, auth, monkeypatch) -> None:
    graded_selftest(monkeypatch)
    with app.app_context():
        earn_trust("ch7_3/selftest_1")  # its answers count at once; selftest_4 has earned nothing
        course = db.session.scalar(db.select(Course))
        enrol(course, "carol", role=Role.STUDENT, password="carol-pass")
        db.session.commit()
    attempts = _student_answers(app, client, auth, [("alice", "alice-pass", UNSURE), ("bob", "bob-pass", UNSURE_TOO),
                                                    ("carol", "carol-pass", "It changes how the model is stored and moved around during training somehow")])
    with app.app_context():
        assert db.session.get(QuizAttempt, attempts["alice"]).score == 1  # the pending answer counts nothing yet
    auth.login("teacher", "teacher-pass")
    queue = client.get("/dashboard/DIST101/review/?lang=en").get_data(as_text=True)
    assert "Self-test 4" in queue
    page = client.get("/dashboard/DIST101/review/ch7_3/selftest_4?lang=en").get_data(as_text=True)
    assert page.count('class="card rgroup"') == 2  # alice + bob together, carol alone
    assert "2 similar answers" in page and "Automatic reading" in page and "selftest" not in page.split("<h1>")[1].split("</h1>")[0]
    assert "speed_cost" not in page  # never an internal id
    group = page.split('class="card rgroup"')[1]
    ids = [int(x.split('"')[0]) for x in group.split('name="answer_id" value="')[1:]]
    assert len(ids) == 2
    zh = client.get("/dashboard/DIST101/review/ch7_3/selftest_4?lang=zh_CN").get_data(as_text=True)
    assert "条相似答案" in zh
    resp = client.post("/dashboard/DIST101/review/ch7_3/selftest_4/decide",
                       data={"answer_id": ids, "verdict": "partial", "points": "0.5", "group": "g"})
    assert resp.status_code == 302
    with app.app_context():
        for name in ("alice", "bob"):
            att = db.session.get(QuizAttempt, attempts[name])
            assert att.score == 1.5, name
            ans = db.session.scalar(db.select(QuizAnswer).where(QuizAnswer.attempt_id == att.id, QuizAnswer.position == POS))
            assert ans.review_state == "reviewed" and ans.score == 0.5 and ans.auto_score is not None
            assert _gradebook_quiz_cell(att, "ch7_3_selftest") == (1.5, att.max_score)  # what the pages show
        assert db.session.get(QuizAttempt, attempts["carol"]).score == 1  # not in the group: untouched
        decision = db.session.scalar(db.select(QuizReviewDecision))
        assert decision.answers == 2 and decision.fraction == 0.5
    # the stored decision is a regression example
    out = app.test_cli_runner().invoke(args=["quiz", "decisions", "ch7_3/selftest_4"])
    example = json.loads(out.output)[0]
    assert example["expect"] == "partial" and example["score"] == 0.5 and example["answer"] == UNSURE
    # a second decision on the same answers finds nothing open
    resp = client.post("/dashboard/DIST101/review/ch7_3/selftest_4/decide", data={"answer_id": ids, "verdict": "full"})
    with app.app_context():
        assert db.session.get(QuizAttempt, attempts["alice"]).score == 1.5
    auth.logout()
    auth.login()
    card = client.get(f"/quiz/attempt/{attempts['alice']}?lang=en").get_data(as_text=True).split(f'id="q{POS}"')[1]
    assert "Confirmed by a teacher" in card.split("</section>")[0]


def test_students_see_only_their_own_queue_and_cannot_decide(app, client, auth) -> None:
    auth.login()
    assert client.get("/dashboard/DIST101/review/").status_code == 404
    assert client.post("/dashboard/DIST101/review/ch7_3/selftest_4/decide", data={"answer_id": 1, "verdict": "full"}).status_code == 404


def test_a_student_may_ask_for_review_once_with_a_comment(app, client, auth) -> None:
    with app.app_context():
        earn_trust("ch7_3/selftest_1")  # a graded free-text verdict counts at once only where trust was earned
    auth.login()
    attempt_id = _start(client, "ch7_3_graded")  # practice answers cannot be asked about
    code, body = _answer(client, attempt_id, 0, "数据并行解决容量")  # graded at once: zero
    assert code == 200 and body["status"] == "graded" and body["score"] == 0
    assert "ask a teacher" in body["review_html"] and "ask a teacher" not in body["card_html"]
    url = f"/quiz/attempt/{attempt_id}/review/0"
    assert client.post(url, data={"comment": ""}).status_code == 302  # refused: says why
    with app.app_context():
        assert db.session.scalar(db.select(QuizAnswer.review_state).where(QuizAnswer.attempt_id == attempt_id)) is None
    client.post(url, data={"comment": "I meant throughput, typo"})
    client.post(url, data={"comment": "again"})
    with app.app_context():
        ans = db.session.scalar(db.select(QuizAnswer).where(QuizAnswer.attempt_id == attempt_id))
        assert ans.review_state == "requested" and ans.review_comment == "I meant throughput, typo"
    page = client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    assert "You asked a teacher to review this answer." in page
    auth.logout()
    auth.login("bob", "bob-pass")
    assert client.post(url, data={"comment": "x"}).status_code == 404  # not bob's answer
    auth.logout()
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/review/ch7_3/selftest_1?lang=en").get_data(as_text=True)
    assert "asked by the student" in page and "I meant throughput, typo" in page


def test_cli_prints_needs_review(app) -> None:
    out = app.test_cli_runner().invoke(args=["quiz", "grade", "ch7_3/selftest_4", "--answer", UNSURE])
    body = json.loads(out.output)
    assert body["needs_review"] is True and body["status"] == "needs_review" and body["score"] == 0
    out = app.test_cli_runner().invoke(args=["quiz", "grade", "ch7_3/selftest_1", "--answer", "吞吐/容量"])
    assert json.loads(out.output)["needs_review"] is False


def test_review_decision_on_postgres(postgres_url, redis_server, tmp_path, monkeypatch) -> None:
    """The decision's SQL (attempt score from the sum of its answers) and the review state in the
    page's aggregated answer list, on PostgreSQL."""
    from flask_migrate import upgrade

    monkeypatch.setenv("DISTGRADE_DEMO_PASSWORDS", "published")  # a deployment's settings, the tests' accounts

    from server import create_app

    app = create_app({"SQLALCHEMY_DATABASE_URI": postgres_url, "REDIS_URL": redis_server.url,
                      "VAR_DIR": str(tmp_path), "WTF_CSRF_ENABLED": False, "SECRET_KEY": "test-only-secret-key-0123456789"})
    graded_selftest(monkeypatch)
    with app.app_context():
        upgrade()
        app.test_cli_runner().invoke(args=["seed-demo"])
        earn_trust("ch7_3/selftest_1")
    client = app.test_client()
    client.post("/login", data={"username": "alice", "password": "alice-pass"})
    attempt_id = _start(client, "ch7_3_selftest")
    assert _answer(client, attempt_id, POS, UNSURE)[1]["status"] == "needs_review"
    assert _answer(client, attempt_id, 0, "数据并行解决吞吐，模型并行解决容量")[1]["correct"]
    assert "Waiting for the teacher" in client.get(f"/quiz/attempt/{attempt_id}?lang=en").get_data(as_text=True)
    client.post("/logout")
    client.post("/login", data={"username": "teacher", "password": "teacher-pass"})
    page = client.get("/dashboard/DIST101/review/ch7_3/selftest_4?lang=en").get_data(as_text=True)
    ids = [int(x.split('"')[0]) for x in page.split('name="answer_id" value="')[1:]]
    client.post("/dashboard/DIST101/review/ch7_3/selftest_4/decide", data={"answer_id": ids, "verdict": "full"})
    with app.app_context():
        assert db.session.get(QuizAttempt, attempt_id).score == 2


def test_a_teacher_can_leave_one_answer_out_of_a_group_decision(app, client, auth, monkeypatch) -> None:
    """A group is answers read alike, which is not always answers that say the same: every answer
    of a group has a tick box (ticked), the decision grades only the ticked ones, and a decision
    with none ticked grades nothing and says why."""
    graded_selftest(monkeypatch)
    with app.app_context():
        earn_trust("ch7_3/selftest_1")
    attempts = _student_answers(app, client, auth, [("alice", "alice-pass", UNSURE), ("bob", "bob-pass", UNSURE_TOO)])
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/review/ch7_3/selftest_4?lang=en").get_data(as_text=True)
    group = page.split('class="card rgroup"')[1]
    assert group.count('type="checkbox" name="answer_id"') == 2 and group.count("checked") >= 2
    ids = [int(x.split('"')[0]) for x in group.split('name="answer_id" value="')[1:]]
    none = client.post("/dashboard/DIST101/review/ch7_3/selftest_4/decide?lang=en",
                       data={"verdict": "full", "group": "g"}, follow_redirects=True).get_data(as_text=True)
    assert "Tick at least one answer that is still open" in none
    client.post("/dashboard/DIST101/review/ch7_3/selftest_4/decide", data={"answer_id": ids[:1], "verdict": "full"})
    with app.app_context():
        states = sorted(db.session.scalar(db.select(QuizAnswer.review_state).where(
            QuizAnswer.attempt_id == attempts[name], QuizAnswer.position == POS)) for name in ("alice", "bob"))
    assert states == ["pending", "reviewed"], states


def _queue_requested(app) -> int:
    from server.quiz import review

    with app.app_context():
        course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
        return sum(c["requested"] for c in review.queue_counts(course.id).values())


def test_practice_answers_cannot_be_sent_to_the_teachers_queue(app, client, auth) -> None:
    """Practice counts nothing: "ask the teacher" on practice answers flooded the course queue
    (unlimited attempts, a request per answer). It is neither offered nor accepted there."""
    auth.login()
    for round_ in range(2):
        attempt_id = _start(client, "ch7_3_selftest")
        code, body = _answer(client, attempt_id, 0, "数据并行解决容量")  # graded at once: zero
        assert code == 200 and body["status"] == "graded"
        assert body["review_html"] == ""
        for lang in ("en", "zh_CN"):
            page = client.get(f"/quiz/attempt/{attempt_id}?lang={lang}").get_data(as_text=True)
            assert f"/quiz/attempt/{attempt_id}/review/0" not in page
        resp = client.post(f"/quiz/attempt/{attempt_id}/review/0?lang=en", data={"comment": "please"})
        assert resp.status_code == 302
        page = client.get(resp.headers["Location"].split("#")[0] + "?lang=en").get_data(as_text=True)
        assert "Practice answers count nothing" in page
        client.post(f"/quiz/attempt/{attempt_id}/finish")
    assert _queue_requested(app) == 0
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count(QuizAnswer.id)).where(QuizAnswer.review_state.is_not(None))) == 0


def test_review_requests_are_bounded_per_attempt(app, client, auth) -> None:
    app.config["QUIZ_REVIEW_REQUESTS_PER_ATTEMPT"] = 1
    with app.app_context():  # both verdicts count at once (earned trust), so both may be asked about
        earn_trust("ch7_3/selftest_1")
        earn_trust("ch7_3/selftest_2")
    auth.login()
    attempt_id = _start(client, "ch7_3_graded")
    assert _answer(client, attempt_id, 0, "数据并行解决容量")[1]["status"] == "graded"
    assert _answer(client, attempt_id, 1, "等价于单卡大 batch，前提是梯度同步。")[1]["status"] == "graded"
    client.post(f"/quiz/attempt/{attempt_id}/review/0", data={"comment": "typo"})
    resp = client.post(f"/quiz/attempt/{attempt_id}/review/1?lang=zh_CN", data={"comment": "again"})
    page = client.get(resp.headers["Location"].split("#")[0] + "?lang=zh_CN").get_data(as_text=True)
    assert "本次作答最多可请老师复核 1 个回答" in page
    assert _queue_requested(app) == 1


def test_quiz_review_decisions_are_in_the_audit_log(app, client, auth, monkeypatch) -> None:
    """Annotation, manual-cell and integrity decisions were audited; quiz free-text ones were not."""
    from server.scores.models import AuditEntry

    graded_selftest(monkeypatch)  # practice never waits for a teacher: only graded answers reach the queue

    attempts = _student_answers(app, client, auth, [("alice", "alice-pass", UNSURE), ("bob", "bob-pass", UNSURE_TOO)])
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/review/ch7_3/selftest_4?lang=en").get_data(as_text=True)
    ids = [int(x.split('"')[0]) for x in page.split('name="answer_id" value="')[1:]]
    client.post("/dashboard/DIST101/review/ch7_3/selftest_4/decide",
                data={"answer_id": ids, "verdict": "partial", "points": "0.5", "group": "g"})
    with app.app_context():
        rows = db.session.scalars(db.select(AuditEntry).order_by(AuditEntry.id)).all()
        assert sorted(r.target for r in rows) == sorted(f"quiz:ch7_3_selftest/attempt:{attempts[n]}/ch7_3/selftest_4"
                                                        for n in ("alice", "bob"))
        assert {(r.old, r.new) for r in rows} == {(0.0, 0.5)} and all("review" in r.reason for r in rows)
    for lang in ("en", "zh_CN"):
        audit = client.get(f"/dashboard/DIST101/audit?lang={lang}").get_data(as_text=True)
        assert audit.count("/ch7_3/selftest_4\">") == 2  # two rows; the stored target is kept in data-target


def test_unsure_practice_answers_reach_the_queue_only_a_few_at_a_time(app, client, auth) -> None:
    """The other door of the practice flood: unlimited practice attempts, each with answers the
    rubric is unsure of. A practice answer keeps the rubric's own reading (practice counts nothing)
    instead of waiting for a teacher, however many there are."""
    auth.login()
    states = []
    for _ in range(4):
        attempt_id = _start(client, "ch7_3_selftest")
        code, body = _answer(client, attempt_id, POS, UNSURE)
        states.append(body["status"])
        if body["status"] == "graded":
            assert "Waiting for the teacher" not in body["card_html"] and "teacher will confirm" not in body["card_html"]
        client.post(f"/quiz/attempt/{attempt_id}/finish")
    # practice never waits, so none of them reaches the teachers' queue
    assert states == ["graded", "graded", "graded", "graded"]
    with app.app_context():
        course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
        from server.quiz import review
        assert review.queue_counts(course.id).get("ch7_3/selftest_4", {}).get("pending", 0) == 0
