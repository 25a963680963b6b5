"""The quiz list and a quiz's overview show one score: the student's gradebook cell (which knows
a teacher's override, the course the attempt belongs to, and whether the quiz counts at all), the
number the gradebook and its exports show; never a second one worked out from the attempts."""
from __future__ import annotations

import re

from coursework.quiz.bank import load_question, load_quiz
from server.extensions import db
from server.quiz.models import QuizAttempt

GRADED, PRACTICE = "ch7_3_graded", "ch7_3_selftest"
SCORE = re.compile(r"\d+(?:\.\d+)? / \d+(?:\.\d+)?")


def _finish_attempt(client, quiz_id: str, **answer) -> int:
    resp = client.post(f"/quiz/{quiz_id}/start")
    attempt_id = int(resp.headers["Location"].rstrip("/").split("/")[-1])
    if answer:
        client.post(f"/quiz/attempt/{attempt_id}/answer/0", data=answer, headers={"Accept": "application/json"})
    client.post(f"/quiz/attempt/{attempt_id}/finish")
    return attempt_id


def _quiz_max(quiz_id: str) -> float:
    return sum(load_question(q).points for q in load_quiz(quiz_id).question_ids)


def _meta_lines(client, quiz_id: str, lang: str = "en") -> dict[str, str]:
    """The line under the quiz's title on the list and on its overview (where its score is shown)."""
    index = client.get(f"/quiz/?lang={lang}").get_data(as_text=True)
    item = next(li for li in index.split('<li class="card hw">')[1:] if f'/quiz/{quiz_id}/"' in li)
    overview = client.get(f"/quiz/{quiz_id}/?lang={lang}").get_data(as_text=True)
    return {"list": item.split('<p class="meta">')[1].split("</p>")[0],
            "overview": overview.split('<p class="meta">')[1].split("</p>")[0]}


def _scores(meta: str) -> list[str]:
    """Every "x / y" score on the line except the attempts count."""
    attempts = re.search(r"(Attempts|次数)[^<]*<strong>[^<]*</strong>", meta)
    rest = meta.replace(attempts.group(0), "") if attempts else meta
    return SCORE.findall(re.sub(r"<[^>]+>", "", rest))


def _gradebook_cell(app, quiz_id: str, username: str = "alice"):
    from server.scores.gradebook import build_gradebook
    from server.models import Course

    with app.app_context():
        book = build_gradebook(db.session.scalar(db.select(Course)))
        return next(r for r in book.rows if r.username == username).cells.get(f"quiz:{quiz_id}")


def test_a_teachers_override_is_the_one_score_on_the_list_and_the_overview(app, client, auth) -> None:
    from server.scores.actions import set_override
    from server.models import Course, User

    auth.login()
    _finish_attempt(client, GRADED, answer="吞吐/容量")
    top = _quiz_max(GRADED)
    with app.app_context():
        alice = db.session.scalar(db.select(User).where(User.username == "alice"))
        teacher = db.session.scalar(db.select(User).where(User.username == "teacher"))
        set_override(db.session.scalar(db.select(Course)).id, alice.id, f"quiz:{GRADED}", 7, "oral exam instead",
                     teacher.id, computed=1.0, top=top)
    assert _gradebook_cell(app, GRADED).score == 7
    for lang, reason in (("en", "changed by the teacher: oral exam instead"), ("zh_CN", "老师修改：oral exam instead")):
        for where, meta in _meta_lines(client, GRADED, lang).items():
            assert _scores(meta) == [f"7 / {top:g}"], (lang, where, meta)  # one number: the override's
            assert reason in meta, (lang, where)


def test_the_score_shown_is_the_gradebook_cell(app, client, auth) -> None:
    from tests.server.quiz.trust_helpers import earn_trust

    with app.app_context():
        earn_trust("ch7_3/selftest_1")  # free text counts at once only where its reading earned trust
    auth.login()
    _finish_attempt(client, GRADED, answer="吞吐/容量")
    _finish_attempt(client, GRADED)  # a worse attempt: the best one counts
    cell, top = _gradebook_cell(app, GRADED), _quiz_max(GRADED)
    assert cell.score > 0
    for lang, label, why in (("en", "Counted", "your best finished attempt"), ("zh_CN", "计分", "取你得分最高的一次作答")):
        for where, meta in _meta_lines(client, GRADED, lang).items():
            assert _scores(meta) == [f"{cell.score:g} / {top:g}"], (lang, where, meta)
            assert label in meta and why in meta, (lang, where, meta)


def test_an_attempt_the_gradebook_does_not_count_is_not_shown_as_counting(app, client, auth) -> None:
    """An attempt outside the student's course (started before they were enrolled) is in no
    gradebook: the quiz pages must not call its score "the score that counts"."""
    auth.login()
    _finish_attempt(client, GRADED, answer="吞吐/容量")
    with app.app_context():
        for att in db.session.scalars(db.select(QuizAttempt)):
            att.course_id = None
        db.session.commit()
    assert _gradebook_cell(app, GRADED) is None
    for where, meta in _meta_lines(client, GRADED).items():
        assert _scores(meta) == [] and "Score that counts" not in meta and "Counted:" not in meta, (where, meta)


def test_a_practice_quiz_score_says_it_is_not_counted(app, client, auth) -> None:
    auth.login()
    _finish_attempt(client, PRACTICE, answer="数据并行解决吞吐，模型并行解决容量")
    cell = _gradebook_cell(app, PRACTICE)
    assert cell is not None and cell.score > 0
    for lang, label, not_counted in (("en", "Best score", "practice, not counted"), ("zh_CN", "最高分", "练习，不计入总分")):
        for where, meta in _meta_lines(client, PRACTICE, lang).items():
            assert _scores(meta) == [f"{cell.score:g} / {_quiz_max(PRACTICE):g}"], (lang, where, meta)
            assert label in meta and not_counted in meta, (lang, where, meta)
            assert "Score that counts" not in meta and "Counted:" not in meta and "计入成绩的得分" not in meta
