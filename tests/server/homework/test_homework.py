"""Homework pages: list, spec, upload validation (nothing stored on refusal), attempts, access, report."""
from __future__ import annotations

import io
from datetime import timedelta

import pytest
from server.extensions import db
from server.models import CourseAssignment, Submission, utcnow

PLACEHOLDER = "hello_ddp"  # tests/fixtures/assignments/hello_ddp, copied by tests/server/conftest.py
URL = f"/homework/DIST101/{PLACEHOLDER}"


def count_subs(app) -> int:
    with app.app_context():
        return db.session.scalar(db.select(db.func.count()).select_from(Submission))


def upload(client, name: str, data: bytes, lang: str = "en"):
    return client.post(f"{URL}?lang={lang}", data={"file": (io.BytesIO(data), name)},
                       content_type="multipart/form-data")


def test_list_shows_title_deadline_attempts(client, auth, hw, make_sub):
    make_sub(status="graded")
    make_sub(status="error")  # a grading failure costs no attempt
    make_sub(status="queued")
    auth.login()
    page = client.get("/homework/?lang=en").get_data(as_text=True)
    assert "Example: two-process data parallel" in page
    assert "1 / 3" in page and "1 in progress" in page
    assert "5 / 10" in page  # best score


def test_assignment_page_renders_spec_and_form(client, auth, hw):
    auth.login()
    page = client.get(URL + "?lang=en").get_data(as_text=True)
    assert "<strong>DistributedSampler</strong>" in page
    assert 'type="file"' in page and 'enctype="multipart/form-data"' in page
    zh = client.get(URL + "?lang=zh_CN").get_data(as_text=True)
    assert "只在 rank 0 打日志" in zh


def test_unknown_homework_is_404(client, auth, hw):
    auth.login()
    assert client.get("/homework/DIST101/nope").status_code == 404
    assert client.get(f"/homework/OTHER/{PLACEHOLDER}").status_code == 404


@pytest.mark.parametrize("name, data, message", [
    ("train.txt", b"print(1)\n", "File type .txt is not accepted"),
    ("train", b"print(1)\n", "File type (none) is not accepted"),
    ("train.py", b"", "The file is empty"),
    ("train.py", b"#" * 5000, "The file is too large (5,000 bytes)"),
    ("train.py", b"print('\xff\xfe')\n", "not UTF-8"),
])
def test_bad_upload_is_refused_and_nothing_stored(app, client, auth, hw, name, data, message):
    auth.login()
    r = upload(client, name, data)
    assert r.status_code == 400
    page = r.get_data(as_text=True)
    assert message in page and "Nothing was stored" in page
    assert count_subs(app) == 0


def test_bad_upload_message_in_chinese(app, client, auth, hw):
    auth.login()
    page = upload(client, "train.py", b"", lang="zh_CN").get_data(as_text=True)
    assert "文件是空的" in page and "没有保存任何内容" in page


def test_missing_file_is_refused(app, client, auth, hw):
    auth.login()
    r = client.post(URL + "?lang=en", data={}, content_type="multipart/form-data")
    assert r.status_code == 400 and "Choose a file" in r.get_data(as_text=True)
    assert count_subs(app) == 0


def test_request_over_server_limit_is_413(app, client, auth, hw):
    auth.login()
    app.config["MAX_CONTENT_LENGTH"] = 10_000
    r = upload(client, "train.py", b"#" * 20_000)
    assert r.status_code == 413 and count_subs(app) == 0


def test_good_upload_is_stored_then_enqueued(app, client, auth, hw, redis_server):
    import redis as redis_lib

    auth.login()
    data = b"print('ddp')\n"
    r = upload(client, "train.py", data)
    assert r.status_code == 302 and r.location.startswith("/submissions/")
    with app.app_context():
        sub = db.session.scalars(db.select(Submission)).one()
        assert (sub.status, sub.filename, sub.content, sub.size) == ("queued", "train.py", data, len(data))
        assert sub.sha256 == Submission.digest(data)
        assert sub.mode == app.config["GRADER_MODE"] and sub.resource == "cpu"
        assert sub.job_id == f"sub-{sub.id}-g1"
    conn = redis_lib.Redis.from_url(redis_server.url)
    assert conn.lrange("rq:queue:distgrade-cpu", 0, -1) == [b"sub-1-g1"]


def test_attempt_limit_counts_only_graded(app, client, auth, hw, make_sub):
    for _ in range(3):
        make_sub(status="error")  # never counted
    auth.login()
    assert upload(client, "train.py", b"print(1)\n").status_code == 302
    for _ in range(2):
        make_sub(status="graded")
    # two graded + one queued: a new upload replaces the queued one (at most one pending per
    # homework), so it needs no attempt of its own and three graded attempts stay the most possible
    r = upload(client, "train.py", b"print(2)\n")
    assert r.status_code == 302
    with app.app_context():
        statuses = sorted(s.status for s in db.session.scalars(db.select(Submission)))
        assert statuses.count("queued") == 1 and statuses.count("replaced") == 1 and statuses.count("graded") == 2
    before = count_subs(app)
    with app.app_context():
        db.session.execute(db.update(Submission).where(Submission.status == "queued").values(status="graded"))
        db.session.commit()
    r = upload(client, "train.py", b"print(3)\n")
    assert r.status_code == 400 and "used all 3 attempts" in r.get_data(as_text=True)
    assert count_subs(app) == before


@pytest.mark.parametrize("penalty, accepted", [(0.0, False), (0.1, True)])
def test_past_deadline(app, client, auth, hw, penalty, accepted):
    with app.app_context():
        ca = db.session.get(CourseAssignment, hw)
        ca.deadline, ca.late_penalty_per_day = utcnow() - timedelta(hours=1), penalty
        db.session.commit()
    auth.login()
    r = upload(client, "train.py", b"print(1)\n")
    if accepted:
        assert r.status_code == 302
    else:
        assert r.status_code == 400 and "deadline has passed" in r.get_data(as_text=True)
        assert count_subs(app) == 0


def test_other_students_submission_is_404(client, auth, make_sub):
    sid = make_sub(username="bob")
    auth.login("alice", "alice-pass")
    assert client.get(f"/submissions/{sid}").status_code == 404
    assert client.get(f"/submissions/{sid}/report").status_code == 404
    assert client.get("/submissions/9999").status_code == 404


def test_instructor_sees_any_submission(client, auth, make_sub):
    sid = make_sub(username="bob")
    auth.login("teacher", "teacher-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "bob" in page and "Speed-up too low." in page


def test_report_page(client, auth, make_sub):
    sid = make_sub()
    auth.login()
    page = client.get(f"/submissions/{sid}/report?lang=en").get_data(as_text=True)
    assert "Almost there." in page and "Check the sampler." in page
    assert 'class="badge badge-pass"' in page and 'class="badge badge-fail"' in page
    assert page.count("<svg") == 2 and "<polyline" in page and "<rect" in page
    assert "rank0 &lt;done&gt;" in page  # logs are escaped
    assert "<details class=\"evidence\">" in page
    partial = client.get(f"/submissions/{sid}/report?partial=1").get_data(as_text=True)
    assert "<html" not in partial and 'id="report"' in partial


def test_unfinished_report_redirects_to_status(client, auth, make_sub):
    sid = make_sub(status="running", progress_json={"phase": "training", "logs": {"rank0": "step 3"}})
    auth.login()
    assert client.get(f"/submissions/{sid}/report").status_code == 302
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "training" in page and "step 3" in page and "status.js" in page


@pytest.mark.parametrize("who, sees_traceback", [("alice", False), ("teacher", True)])
def test_error_shows_traceback_only_to_staff(client, auth, make_sub, who, sees_traceback):
    sid = make_sub(status="error", error_detail="Traceback: KeyError 'secret-grader-detail'",
                   report_json={"assignment": PLACEHOLDER, "status": "error", "checks": [],
                                "staff_traceback": "Traceback: KeyError 'secret-grader-detail'"})
    auth.login(who, f"{who}-pass")
    page = client.get(f"/submissions/{sid}?lang=en").get_data(as_text=True)
    assert "staff have been notified" in page and "not counted" in page
    assert ("secret-grader-detail" in page) is sees_traceback


def test_history_lists_only_own_submissions(client, auth, make_sub):
    own, other = make_sub(), make_sub(username="bob")
    auth.login()
    page = client.get(URL).get_data(as_text=True)
    assert f"/submissions/{own}" in page and f"/submissions/{other}\"" not in page


@pytest.mark.parametrize("plots, kinds", [
    ({"throughput": {"1": 400.0, "2": 700.0}}, ["bar"]),
    ({"throughput": {"nproc": [1, 2], "samples_per_s": [1670.2, 1187.1]}}, ["bar"]),  # the ddp_speedup shape
    ({"loss": {"n1.rank0": [2.3, 1e-4, 0.0], "n2.rank0": [2.3, 1e-3]}}, ["line"]),  # log scale with zeros, unequal lengths
    ({"odd": {"a": "x"}, "empty": {}, "flat": [1, 2]}, []),  # shapes it cannot draw are skipped
])
def test_charts_from_plots(plots, kinds):
    from server.homework.charts import charts_for

    charts = charts_for(plots)
    assert [c.kind for c in charts] == kinds
    for c in charts:
        assert str(c.svg).startswith("<svg") and "nan" not in str(c.svg)


def test_markdown_is_escaped_and_links_are_checked():
    from server.homework.markdown import render

    html = str(render("# T\n<script>x</script> **b** `<c>` [ok](https://a.b) [bad](javascript:alert(1))"))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<strong>b</strong>" in html and "<code>&lt;c&gt;</code>" in html
    assert '<a href="https://a.b">ok</a>' in html and "javascript:" not in html.split("[bad]")[0]
    assert 'href="javascript' not in html


def test_markdown_tables_and_italics_as_the_specs_use_them():
    from server.homework.markdown import render

    html = str(render("Grade *this value*, not 2*3*4.\n\n| Part | Points |\n|---|---:|\n| A <b> | 10 |\n"
                      "after the table\n\n| not | a table |\n| because | no rule |\n"))
    assert "<em>this value</em>" in html and "2*3*4" in html
    assert '<th scope="col">Part</th>' in html and "<td>A &lt;b&gt;</td><td>10</td>" in html
    assert "<p>after the table</p>" in html
    assert html.count("<table") == 1  # rows without a |---| rule stay text
