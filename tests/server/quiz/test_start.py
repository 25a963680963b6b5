"""Starting an attempt: a double click opens the attempt that won, and the attempt is filed under
the course the student takes the quiz in (a person in two courses)."""
from __future__ import annotations

from sqlalchemy import event, insert

from server.extensions import db
from server.quiz.models import QuizAttempt


def test_a_double_clicked_start_opens_the_attempt_that_won(app, client, auth) -> None:
    """Two "Start" posts read "no open attempt" at the same time; the second insert hits
    UNIQUE(user, quiz, attempt_no). It must open the first one's attempt, not answer 500.

    The race is made exact: just before this request inserts its row, the other request's row
    is committed on another connection (what the winner of a real double click does)."""
    auth.login()
    with app.app_context():
        from server.models import User
        alice = db.session.scalar(db.select(User).where(User.username == "alice"))
        uid, course_id = alice.id, alice.memberships[0].course_id
    won = {}

    def other_request_wins(mapper, connection, target) -> None:
        if won:
            return  # the first insert only
        with db.engine.begin() as other:
            won["id"] = other.execute(insert(QuizAttempt.__table__).values(
                user_id=uid, course_id=course_id, quiz_id=target.quiz_id, attempt_no=target.attempt_no,
                mode=target.mode, status="open", question_ids=target.question_ids, score=0.0,
                max_score=target.max_score, started_at=_now())).inserted_primary_key[0]

    event.listen(QuizAttempt, "before_insert", other_request_wins)
    try:
        resp = client.post("/quiz/ch7_3_graded/start")
    finally:
        event.remove(QuizAttempt, "before_insert", other_request_wins)
    assert resp.status_code == 302, resp.status_code
    assert resp.headers["Location"].endswith(f"/quiz/attempt/{won['id']}")
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count(QuizAttempt.id))) == 1
    assert client.get(resp.headers["Location"]).status_code == 200


def _now():
    from server.models import utcnow
    return utcnow()


def _second_course(app, code: str = "DIST202") -> int:
    from server.models import Role
    from server.roster import enrol, ensure_course

    with app.app_context():
        course = ensure_course(code, "Second course / 第二门课")
        enrol(course, "alice", role=Role.STUDENT)
        db.session.commit()
        return course.id


def test_the_attempt_is_filed_under_the_course_the_student_chose(app, client, auth) -> None:
    """alice studies in DIST101 (her first membership) and DIST202: taking the quiz for DIST202
    files the attempt there, not under her first membership."""
    second = _second_course(app)
    auth.login()
    resp = client.post("/quiz/ch7_3_graded/start", data={"course": "DIST202"})
    assert resp.status_code == 302
    with app.app_context():
        att = db.session.scalar(db.select(QuizAttempt))
        assert att.course_id == second


def test_a_student_in_two_courses_is_asked_which_one(app, client, auth) -> None:
    _second_course(app)
    auth.login()
    for lang, word in (("en", "Course"), ("zh_CN", "课程")):
        page = client.get(f"/quiz/ch7_3_graded/?lang={lang}").get_data(as_text=True)
        assert 'name="course"' in page and "DIST202" in page and "DIST101" in page and word in page
    resp = client.post("/quiz/ch7_3_graded/start")  # no choice: nothing started, asked again
    assert resp.status_code == 302 and "/attempt/" not in resp.headers["Location"]
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count(QuizAttempt.id))) == 0
    resp = client.post("/quiz/ch7_3_graded/start", data={"course": "NOPE"})  # not hers: asked again
    assert "/attempt/" not in resp.headers["Location"]


def test_a_student_in_one_course_needs_no_choice(app, client, auth) -> None:
    auth.login()
    page = client.get("/quiz/ch7_3_graded/?lang=en").get_data(as_text=True)
    assert '<select name="course"' not in page
    resp = client.post("/quiz/ch7_3_graded/start")
    assert "/attempt/" in resp.headers["Location"]
