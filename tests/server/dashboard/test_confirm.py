"""Confirming is cheap: C confirms a group's suggestion in one decision; a group larger
than the sample size is settled from a random sample of 29 the teacher reads, and only the sampled
answers become labelled examples."""
from __future__ import annotations

from coursework.review_sampling import SAMPLE_SIZE, sample, sample_size
from server.extensions import db
from server.models import Course, Role, User
from server.quiz.models import QuizAnswer, QuizAttempt, ReaderLabel
from server.roster import enrol

QID = "ch7_3/selftest_1"


def _pending(app, n: int, text: str = "数据并行解决吞吐，模型并行解决容量", share: float = 1.0) -> list[int]:
    """``n`` students' provisional answers to selftest_1 in the graded quiz, read alike."""
    with app.app_context():
        course = db.session.scalar(db.select(Course))
        ids = []
        for i in range(n):
            user = enrol(course, f"s{i:03d}", role=Role.STUDENT, password="pw-pw-pw-pw")[0]
            db.session.flush()
            att = QuizAttempt(user_id=user.id, course_id=course.id, quiz_id="ch7_3_graded", attempt_no=1, mode="graded",
                              status="submitted", question_ids=[QID], max_score=1.0)
            db.session.add(att)
            db.session.flush()
            ans = QuizAnswer(attempt_id=att.id, user_id=user.id, quiz_id="ch7_3_graded", question_id=QID, position=0,
                             seed=1, lang="zh", raw_answer=text + ("" if i % 2 else "。"), score=0.0, max_score=1.0,
                             fraction=0.0, correct=False, details_json={"met": ["dp_throughput", "mp_capacity"],
                             "missing": [], "confused": [], "provisional_fraction": share, "readings": {"rule": share},
                             "provisional_reason": "untrusted"}, feedback_json=[], review_state="pending",
                             auto_score=share)
            db.session.add(ans)
            db.session.flush()
            ids.append(ans.id)
        db.session.commit()
        return ids


def test_sample_size_is_29_for_large_groups_and_everything_for_small_ones() -> None:
    assert SAMPLE_SIZE == 29 and sample_size(10) == 10 and sample_size(29) == 29 and sample_size(500) == 29
    items = list(range(100))
    assert sample(items, "k") == sample(items, "k") and len(sample(items, "k")) == 29


def test_c_confirms_the_groups_suggestion(app, client, auth) -> None:
    ids = _pending(app, 3)
    auth.login("teacher", "teacher-pass")
    page = client.get(f"/dashboard/DIST101/review/{QID}?lang=en").get_data(as_text=True)
    assert 'data-key="c"' in page and "Confirm the suggestion: 1 / 1" in page and "sample_id" not in page
    group = page.split('name="group" value="')[1].split('"')[0]
    resp = client.post(f"/dashboard/DIST101/review/{QID}/confirm", data={"answer_id": ids, "verdict": "suggested",
                                                                          "group": group})
    assert resp.status_code == 302
    with app.app_context():
        assert {a.review_state for a in db.session.scalars(db.select(QuizAnswer))} == {"reviewed"}
        assert sum(a.score for a in db.session.scalars(db.select(QuizAnswer))) == 3
        assert db.session.scalar(db.select(db.func.count(ReaderLabel.id))) == 1  # one text (punctuation aside): one label
    zh = client.get(f"/dashboard/DIST101/review/{QID}?lang=zh_CN").get_data(as_text=True)
    assert "没有等待" in zh or "review-empty" in zh


def test_a_large_group_settles_from_a_confirmed_sample(app, client, auth) -> None:
    ids = _pending(app, 35, share=0.5)
    auth.login("teacher", "teacher-pass")
    page = client.get(f"/dashboard/DIST101/review/{QID}?lang=en").get_data(as_text=True)
    sampled = [int(x.split('"')[0]) for x in page.split('name="sample_id" value="')[1:]]
    assert len(sampled) == 29 and "the other 6 answers of the group settle" in page
    group = page.split('name="group" value="')[1].split('"')[0]
    too_few = client.post(f"/dashboard/DIST101/review/{QID}/confirm?lang=en",
                          data={"answer_id": ids, "sample_id": sampled[:5], "verdict": "sample", "group": group},
                          follow_redirects=True).get_data(as_text=True)
    assert "nothing was graded" in too_few
    client.post(f"/dashboard/DIST101/review/{QID}/confirm",
                data={"answer_id": ids, "sample_id": sampled, "verdict": "sample", "group": group})
    with app.app_context():
        answers = list(db.session.scalars(db.select(QuizAnswer)))
        assert {a.review_state for a in answers} == {"reviewed"} and {a.score for a in answers} == {0.5}
        hows = [r.how for r in db.session.scalars(db.select(ReaderLabel))]
        assert hows and set(hows) == {"sample"}  # settled answers teach the readers nothing
        assert db.session.get(QuizAttempt, answers[0].attempt_id).score == 0.5
