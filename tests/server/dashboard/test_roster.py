"""Instructor pages: CSV roster import and the per-homework submission list."""
from __future__ import annotations

import html
import io

import pytest

from server.extensions import db
from server.models import User


def post_csv(client, data: bytes, lang: str = "en"):
    return client.post(f"/instructor/DIST101/roster?lang={lang}", data={"file": (io.BytesIO(data), "roster.csv")},
                       content_type="multipart/form-data")


def test_import_shows_generated_passwords(app, client, auth):
    auth.login("teacher", "teacher-pass")
    r = post_csv(client, "username,display_name\ncarol,Carol C\ndave,戴维\n".encode())
    page = r.get_data(as_text=True)
    assert r.status_code == 200 and "2 people enrolled." in page
    assert "carol" in page and "戴维" in page
    with app.app_context():
        carol = db.session.scalar(db.select(User).where(User.username == "carol"))
        shown = page.split("<code>carol</code></td><td><code>")[1].split("</code>")[0]
        assert carol.check_password(shown)


@pytest.mark.parametrize("data, error", [
    (b"name\ncarol\n", "header with a 'username' column"),
    (b"username\ncarol\n\xff\xfe\n", "not UTF-8"),
    (b"username,display_name\ncarol,C\n,Nobody\n", "line 3: missing username"),
    (b"username\ncarol\nbad name\n", "line 3: invalid username"),
])
def test_import_errors_per_line_and_nothing_imported(app, client, auth, data, error):
    auth.login("teacher", "teacher-pass")
    r = post_csv(client, data)
    page = html.unescape(r.get_data(as_text=True))
    assert r.status_code == 400 and error in page and "Nothing was imported" in page
    with app.app_context():
        assert db.session.scalar(db.select(User).where(User.username == "carol")) is None


def test_import_errors_in_chinese(client, auth):
    auth.login("teacher", "teacher-pass")
    page = html.unescape(post_csv(client, b"username\ncarol\n,x\n", lang="zh_CN").get_data(as_text=True))
    assert "第 3 行：缺少用户名" in page and "line 3" not in page


def test_import_without_file(client, auth):
    auth.login("teacher", "teacher-pass")
    r = client.post("/instructor/DIST101/roster?lang=en", data={}, content_type="multipart/form-data")
    assert r.status_code == 400 and "Choose a CSV file" in r.get_data(as_text=True)


def test_roster_lists_members(client, auth):
    auth.login("teacher", "teacher-pass")
    page = client.get("/instructor/DIST101/roster").get_data(as_text=True)
    assert all(f"<code>{n}</code>" in page for n in ("teacher", "alice", "bob"))


@pytest.mark.parametrize("path", ["/instructor/", "/instructor/DIST101/roster", "/instructor/DIST101/hello_ddp"])
def test_students_get_404(client, auth, hw, path):
    auth.login()
    assert client.get(path).status_code == 404
    assert post_csv(client, b"username\nmallory\n").status_code == 404


def test_instructor_of_another_course_gets_404(app, client, auth):
    from server.roster import enrol, ensure_course
    from server.models import Role

    with app.app_context():
        other = ensure_course("OTHER1", "Other")
        enrol(other, "tom", role=Role.INSTRUCTOR, password="tom-pass")
        db.session.commit()
    auth.login("tom", "tom-pass")
    assert client.get("/instructor/DIST101/roster").status_code == 404
    assert client.get("/instructor/OTHER1/roster").status_code == 200


def test_submission_list_shows_traceback_of_errors(client, auth, make_sub):
    make_sub(username="bob", status="error", error_detail="Traceback: ZeroDivisionError in grader")
    make_sub(username="alice", status="graded")
    auth.login("teacher", "teacher-pass")
    page = client.get("/instructor/DIST101/hello_ddp?lang=en").get_data(as_text=True)
    assert "ZeroDivisionError in grader" in page
    assert "bob" in page and "alice" in page and "5 / 10" in page
