"""The quiz's two hot requests (the attempt page and an answer post) check the session version
inside their own attempt query: one statement, not a second one per request, and a session
ended by a logout or a new password still gets the login page, never the attempt."""
from __future__ import annotations

from sqlalchemy import event, update

from server.extensions import db
from server.models import User


def _statements(app, fn) -> list[str]:
    seen: list[str] = []
    with app.app_context():
        engine = db.engine

    def log(conn, cursor, statement, *args):
        seen.append(statement)
    event.listen(engine, "before_cursor_execute", log)
    try:
        fn()
    finally:
        event.remove(engine, "before_cursor_execute", log)
    return seen


def test_the_attempt_page_and_an_answer_cost_one_query_for_auth_and_ownership(app, client, auth) -> None:
    auth.login("alice", "alice-pass")
    path = client.post("/quiz/ch7_3_selftest/start").headers["Location"]
    client.get(path)  # rendered once: the cached page needs only the attempt row
    page = _statements(app, lambda: client.get(path))
    assert len(page) == 1 and "session_version" in page[0], page
    answer = _statements(app, lambda: client.post(f"{path}/answer/0?lang=en", data={"answer": "吞吐/容量"},
                                                  headers={"Accept": "application/json"}))
    assert sum("session_version" in s for s in answer) == 1 and "session_version" in answer[0], answer


def test_an_ended_session_gets_the_login_page_on_the_hot_paths(app, client, auth) -> None:
    auth.login("alice", "alice-pass")
    path = client.post("/quiz/ch7_3_selftest/start").headers["Location"]
    assert client.get(path).status_code == 200
    with app.app_context():
        db.session.execute(update(User).where(User.username == "alice").values(session_version=User.session_version + 1))
        db.session.commit()
    page = client.get(path)
    assert page.status_code == 302 and "/login" in page.headers["Location"]
    post = client.post(f"{path}/answer/0", data={"answer": "吞吐/容量"}, headers={"Accept": "application/json"})
    assert post.status_code in (302, 401) and post.status_code != 200
