"""Release control: per homework and quiz, scores and feedback shown at once (the
default), after the last deadline, or when the instructor publishes. Until then the student sees
that the work was graded, never the score, the checks' verdicts, hints or reference answers; the
status API and the LMS exports hide it too; staff see everything. Publishing is one click,
audited, and can be withdrawn."""
from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest

from server.scores.models import Extension
from server.extensions import db
from server.models import CourseAssignment, User, utcnow
from server.scores.release import ReleaseEvent, ReleaseSetting, hidden_items, is_released
from tests.server.conftest import PLACEHOLDER

ITEM = "hw:hello_ddp"
# what only a released report shows: the score, a check's verdict message and its hint
SECRETS = ("Speed-up too low.", "Check the sampler.", "5 / 10", "Almost there.")


def _set(client, item: str, action: str, mode: str = "", lang: str = "en"):
    kind, _, ref = item.partition(":")
    kind = "homework" if kind == "hw" else kind
    return client.post(f"/dashboard/DIST101/{kind}/{ref}/release?lang={lang}", data={"action": action, "mode": mode},
                       follow_redirects=True)


def _as(auth, who: str) -> None:
    auth.logout()
    auth.login(who, f"{who}-pass")


def _page(client, sid: int, lang: str = "en") -> str:
    return client.get(f"/submissions/{sid}?lang={lang}").get_data(as_text=True)


def test_default_shows_everything_at_once(client, auth, make_sub) -> None:
    sid = make_sub()
    auth.login()
    page = _page(client, sid)
    assert all(s in page for s in SECRETS[:2]) and client.get(f"/api/submissions/{sid}").json["score"] == 5.0


def test_manual_release_hides_then_publish_shows_then_withdraw_hides(app, client, auth, make_sub) -> None:
    sid = make_sub()
    auth.login("teacher", "teacher-pass")
    resp = _set(client, ITEM, "mode", "manual")
    assert resp.status_code == 200 and "until you publish" in resp.get_data(as_text=True)
    assert SECRETS[0] in _page(client, sid)  # staff always see the report

    _as(auth, "alice")
    page = _page(client, sid)
    assert not any(s in page for s in SECRETS), [s for s in SECRETS if s in page]
    assert "graded" in page and "not been released" in page
    zh = _page(client, sid, "zh_CN")
    assert "尚未公布" in zh and "加速比太低" not in zh
    assert "Speed-up too low" not in client.get(f"/submissions/{sid}/report?partial=1&lang=en").get_data(as_text=True)
    status = client.get(f"/api/submissions/{sid}").json
    assert (status["status"], status["score"], status["max_score"], status["released"]) == ("graded", None, None, False)
    assert "5 / 10" not in client.get("/homework/?lang=en").get_data(as_text=True)
    hw_page = client.get("/homework/DIST101/hello_ddp?lang=en").get_data(as_text=True)
    assert "5 / 10" not in hw_page and "not released" in hw_page
    # the student cannot publish it
    assert _set(client, ITEM, "publish").status_code == 404

    _as(auth, "teacher")
    for export in ("canvas", "moodle"):
        rows = list(csv.reader(io.StringIO(client.get(f"/dashboard/DIST101/export/{export}.csv")
                                           .get_data(as_text=True).lstrip("\ufeff"))))
        column = next(i for i, h in enumerate(rows[0]) if f"[{ITEM}]" in h)
        alice = next(r for r in rows if "alice" in r)
        assert alice[column] == ""  # the LMS must not show it either: no grade in the column yet
    jsonl = client.get("/dashboard/DIST101/export/reports.jsonl").get_data(as_text=True)
    assert '"released": false' in jsonl  # the archive keeps everything, marked
    page = _set(client, ITEM, "publish").get_data(as_text=True)
    assert "Released" in page  # the change log, on the page, in words (the stored action in an attribute)
    assert '<span data-action="mode:manual">results shown: when I publish them</span> · teacher' in page
    assert '<span data-action="publish">published</span> · teacher' in page

    _as(auth, "alice")
    assert all(s in _page(client, sid) for s in SECRETS[:2])
    assert client.get(f"/api/submissions/{sid}").json["score"] == 5.0

    _as(auth, "teacher")
    _set(client, ITEM, "withdraw")
    _as(auth, "alice")
    assert SECRETS[0] not in _page(client, sid)
    with app.app_context():
        teacher = db.session.scalar(db.select(User.id).where(User.username == "teacher"))
        log = [(e.action, e.actor_id) for e in db.session.scalars(db.select(ReleaseEvent).order_by(ReleaseEvent.id))]
        assert log == [("mode:manual", teacher), ("publish", teacher), ("withdraw", teacher)]


def test_after_deadline_waits_for_the_last_extension(app, hw, make_sub) -> None:
    sid = make_sub()
    now = utcnow()
    with app.app_context():
        ca = db.session.get(CourseAssignment, hw)
        ca.deadline = now - timedelta(hours=1)
        alice = db.session.scalar(db.select(User.id).where(User.username == "alice"))
        db.session.add(ReleaseSetting(course_id=ca.course_id, item=ITEM, mode="after_deadline"))
        db.session.commit()
        assert is_released(ca.course_id, ITEM)
        db.session.add(Extension(course_assignment_id=ca.id, user_id=alice, deadline=now + timedelta(days=1),
                                 granted_by=alice))
        db.session.commit()
        assert not is_released(ca.course_id, ITEM) and hidden_items(ca.course_id) == {ITEM}
        assert is_released(ca.course_id, ITEM, now + timedelta(days=2))
    assert sid


@pytest.mark.parametrize("mode", ["sometimes", ""])
def test_bad_mode_is_refused_and_changes_nothing(app, client, auth, hw, mode) -> None:
    auth.login("teacher", "teacher-pass")
    resp = _set(client, ITEM, "mode", mode)
    assert resp.status_code == 400 and "Nothing was changed" in resp.get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(ReleaseSetting)) == 0


def test_withdraw_without_publication_is_refused(client, auth, hw) -> None:
    auth.login("teacher", "teacher-pass")
    assert _set(client, ITEM, "withdraw").status_code == 400


def _start(client, quiz_id: str) -> int:
    resp = client.post(f"/quiz/{quiz_id}/start")
    assert resp.status_code == 302, resp.data[:300]
    return int(resp.headers["Location"].rstrip("/").split("/")[-1])


def test_quiz_held_back_until_published(app, client, auth, monkeypatch) -> None:
    from tests.server.quiz.trust_helpers import earn_trust

    with app.app_context():  # a graded free-text verdict is counted (not provisional) only with earned trust
        earn_trust("ch7_3/selftest_1")
    auth.login("teacher", "teacher-pass")
    _set(client, "quiz:ch7_3_graded", "mode", "manual")
    _as(auth, "alice")
    att = _start(client, "ch7_3_graded")
    resp = client.post(f"/quiz/attempt/{att}/answer/0", data={"answer": "数据并行解决吞吐，模型并行解决容量"},
                       headers={"Accept": "application/json"})
    body = resp.get_json()
    assert resp.status_code == 200 and body["status"] == "recorded"
    assert not {"score", "correct", "feedback", "explanation", "reference", "attempt_score"} & body.keys()
    assert "Correct" not in body["card_html"] and "Reference answer" not in body["card_html"]
    page = client.get(f"/quiz/attempt/{att}?lang=en").get_data(as_text=True)
    assert "Answer recorded" in page and "Reference answer" not in page and "Correct" not in page
    client.post(f"/quiz/attempt/{att}/finish")
    results = client.get(f"/quiz/attempt/{att}/results?lang=en").get_data(as_text=True)
    assert "final-score" not in results and "not been released" in results
    assert "not been released" in client.get("/quiz/ch7_3_graded/?lang=en").get_data(as_text=True)

    _as(auth, "teacher")
    _set(client, "quiz:ch7_3_graded", "publish")
    _as(auth, "alice")
    # the quiz's own reference_answers setting (quizint; default after_close) still applies once
    # released: the quiz has closed by now, so its reference answers are due too
    from coursework.quiz.bank import load_quiz
    monkeypatch.setattr(load_quiz("ch7_3_graded"), "closes_at", "2000-01-01T00:00:00Z")
    page = client.get(f"/quiz/attempt/{att}?lang=en").get_data(as_text=True)
    assert "Reference answer" in page and "Correct" in page
    assert 'id="final-score">' in client.get(f"/quiz/attempt/{att}/results?lang=en").get_data(as_text=True)


def test_a_held_report_writes_the_mode_as_the_released_one_does(client, auth, make_sub) -> None:
    """"Mode: cpu" on a held report, "Mode: CPU" once released."""
    sid = make_sub()
    _as(auth, "teacher")
    _set(client, f"hw:{PLACEHOLDER}", "mode", "manual")
    _as(auth, "alice")
    page = _page(client, sid)
    assert "Mode: CPU" in page and "Mode: cpu" not in page
