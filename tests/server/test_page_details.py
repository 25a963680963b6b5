"""Small things on the pages that people noticed: the status timer, the upload limit, the menu."""
from __future__ import annotations

from datetime import timedelta

from server.models import Submission, utcnow


def test_the_status_timer_does_not_restart_when_grading_starts():
    from server.homework.rules import elapsed_s

    now = utcnow()
    sub = Submission(status="running", created_at=now - timedelta(seconds=100), enqueued_at=now - timedelta(seconds=100),
                     started_at=now - timedelta(seconds=40))
    assert elapsed_s(sub) >= 99  # the student has been waiting 100 s, not 40
    sub.status = "queued"
    assert elapsed_s(sub) >= 99


def test_an_upload_over_the_server_limit_gets_the_same_inline_error(app, client, auth, hw):
    import io

    from tests.server.conftest import PLACEHOLDER

    auth.login()
    app.config["MAX_CONTENT_LENGTH"] = 10_000
    r = client.post(f"/homework/DIST101/{PLACEHOLDER}?lang=en",
                    data={"file": (io.BytesIO(b"#" * 20_000), "train.py")}, content_type="multipart/form-data")
    page = r.get_data(as_text=True)
    assert r.status_code == 413
    assert "The file is too large" in page and "Nothing was stored and no attempt was used." in page
    assert 'class="upload"' in page and 'id="file"' in page  # the assignment page itself, form ready again
    assert 'data-max-bytes="4096"' in page  # the browser checks the size before uploading


def test_spec_markdown_indented_code_links_and_backticks():
    from server.homework.markdown import render

    html = str(render("Run it:\n\n    torchrun --standalone train.py\n    python -m graders grade x   # quick\n\n"
                      "after\n\nSee [`set_epoch`](https://pytorch.org/docs) and [the docs](https://a.b).\n"
                      "- item\n    continued line\n"))
    assert "<pre><code>torchrun --standalone train.py\npython -m graders grade x   # quick</code></pre>" in html
    assert "<p>after</p>" in html
    assert '<a href="https://pytorch.org/docs"><code>set_epoch</code></a>' in html
    assert '<a href="https://a.b">the docs</a>' in html
    assert "<li>item continued line</li>" in html


def test_a_bilingual_spec_shows_the_interface_language_only():
    from server.homework.markdown import for_language

    src = ("# 作业 1 / Homework 1\n\n## 中文\n\n中文内容 `x`\n\n## English\n\nEnglish text\n\n### Part\n\nmore\n")
    zh, en = for_language(src, "zh"), for_language(src, "en")
    assert "中文内容" in zh and "English text" not in zh and "## 中文" not in zh
    assert "English text" in en and "### Part" in en and "中文内容" not in en
    assert "# 作业 1 / Homework 1" not in en  # the page has its own title
    plain = "*中文版见 [README.zh.md](README.zh.md).*\n\n# Title\n\nBody\n"
    assert "README.zh.md" not in for_language(plain, "en") and "Body" in for_language(plain, "en")


def test_the_queue_page_names_workers_by_host_and_says_how_long_ago(app, client, auth):
    import os
    import socket

    from rq import Queue, Worker

    from server.grading.queue import queues_for_host, redis_conn

    with app.app_context():
        conn = redis_conn()
        worker = Worker([Queue(n, connection=conn) for n in queues_for_host(0)], connection=conn)
        worker.register_birth()
        worker.heartbeat()
    try:
        auth.login("teacher", "teacher-pass")
        page = client.get("/dashboard/DIST101/queue?lang=en").get_data(as_text=True)
    finally:
        worker.register_death()
    assert f"{socket.gethostname()} · {os.getpid()}" in page
    assert " s ago" in page and worker.name not in page.replace(f'title="{worker.name}"', "")
