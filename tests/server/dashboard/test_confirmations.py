"""What cannot be undone asks first: "Regrade all" shows how many submissions and about how long
before it requeues anything; the batch page follows progress by itself; and while a regrade runs
the student keeps seeing their previous result, labelled as being regraded."""
from __future__ import annotations

import html
import re
from datetime import timedelta

from server.extensions import db
from server.models import Submission, utcnow
from tests.server.conftest import PLACEHOLDER

TEACHER = ("teacher", "teacher-pass")


def _text(resp) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", resp.get_data(as_text=True))).split())


def _statuses(app) -> list[str]:
    with app.app_context():
        return [s.status for s in db.session.scalars(db.select(Submission).order_by(Submission.id))]


def test_regrade_all_asks_with_the_count_and_an_estimate_first(app, client, auth, make_sub):
    now = utcnow()
    for user in ("alice", "bob", "alice"):
        make_sub(user, started_at=now - timedelta(seconds=90), finished_at=now)  # each took 1.5 min to grade
    auth.login(*TEACHER)
    r = client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade?lang=en")
    assert r.status_code == 200
    text = _text(r)
    assert "Regrade 3 submissions?" in text
    assert "about 5 min" in text  # 3 x 90 s with one grader (none is running here)
    assert _statuses(app) == ["graded"] * 3  # nothing requeued yet
    zh = _text(client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade?lang=zh_CN"))
    assert "重新评分 3 份提交？" in zh and "约 5 分钟" in zh
    r = client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade", data={"confirm": "3"})
    assert r.status_code == 302 and "/regrades/" in r.location
    assert _statuses(app) == ["queued"] * 3


def test_a_stale_confirmation_is_asked_again(app, client, auth, make_sub):
    """Confirmed for 1 submission, but 2 are there now: ask again rather than requeue more than was shown."""
    make_sub("alice")
    make_sub("bob")
    auth.login(*TEACHER)
    r = client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade?lang=en", data={"confirm": "1"})
    assert r.status_code == 200 and "Regrade 2 submissions?" in _text(r)
    assert _statuses(app) == ["graded"] * 2


def test_the_batch_page_follows_progress_without_a_reload(app, client, auth, make_sub):
    make_sub("alice")
    auth.login(*TEACHER)
    batch = client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade", data={"confirm": "1"}).location
    page = client.get(batch + "?lang=en").get_data(as_text=True)
    assert "<progress" in page and "regrade.js" in page and "data-poll" in page
    fragment = client.get(batch + "?partial=1&lang=en").get_data(as_text=True)
    assert "0 of 1 finished" in _text(client.get(batch + "?partial=1&lang=en")) and "<html" not in fragment


def test_the_student_keeps_the_old_result_while_it_is_regraded(app, client, auth, make_sub):
    sid = make_sub("alice", score=7.0)
    auth.login(*TEACHER)
    client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade", data={"confirm": "1"})
    auth.logout()
    auth.login("alice", "alice-pass")
    page = _text(client.get(f"/submissions/{sid}?lang=en"))
    assert "Being regraded" in page and "previous result" in page
    assert "7 / 10" in page and "Almost there." in page  # the old report stays readable
    history = _text(client.get(f"/homework/DIST101/{PLACEHOLDER}?lang=en"))
    assert "7 / 10 (being regraded)" in history


def test_the_gradebook_keeps_counting_the_old_score_while_it_is_regraded(app, client, auth, make_sub):
    from server.scores.gradebook import build_gradebook
    from server.models import Course

    make_sub("alice", score=8.5)
    make_sub("alice", score=6.0)
    auth.login(*TEACHER)
    client.post(f"/dashboard/DIST101/homework/{PLACEHOLDER}/regrade", data={"confirm": "2"})
    with app.app_context():
        book = build_gradebook(db.session.get(Course, 1))
        row = next(r for r in book.rows if r.username == "alice")
        cell = row.cells[f"hw:{PLACEHOLDER}"]
        assert cell.score == 8.5 and cell.attempts == 2 and row.total == 8.5
