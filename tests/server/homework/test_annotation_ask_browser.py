"""Asking a teacher about an auto-graded annotation, end to end in a real Chromium against
gunicorn and a real worker: the student (phone width, JavaScript off, Chinese) asks once about a
field marked down, the teacher gives full marks, and the student's score and the gradebook agree."""
from __future__ import annotations

import re
import time

import pytest

from tests.server.dashboard.test_annotation_review_browser import gradebook_total, login_as

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CONFIG = ('{\n  "zero_optimization": {\n    // ZeRO-3 keeps a full copy of the parameters on every card\n'
          '    "stage": 3\n  },\n  "train_batch_size": 64 // global batch = micro-batch per GPU x '
          'accumulation steps x number of GPUs\n}\n')
STAGE = "field.zero_optimization.stage"


def _earn_trust_on_stage(service) -> None:
    """30 agreeing teacher decisions of each kind on the field's notes, in the service's database: the
    worker then counts the reading's 0 at once (``server.grading.task``), so asking is what is left."""
    from server import create_app
    from server.extensions import db
    from server.quiz import labels

    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": service.env["DATABASE_URL"]})
    item = labels.annotation_item("deepspeed", STAGE.removeprefix("field."))
    with app.app_context():
        for share in (1.0, 0.5, 0.0):
            for i in range(30):
                labels.record(item, f"a decided note number {i} worth {share:g}", share, {"rule": share}, "group",
                              None, None)
        db.session.commit()


def test_student_asks_once_without_javascript_and_the_teacher_decides(service, browser, tmp_path) -> None:
    _earn_trust_on_stage(service)
    service.start_web()
    service.start_worker()
    config = tmp_path / "ds_config.json"
    config.write_text(CONFIG, encoding="utf-8")
    student = browser.new_context(locale="zh-CN", viewport={"width": 375, "height": 800}, java_script_enabled=False)
    page = student.new_page()
    try:
        login_as(page, service.url, "alice", "alice-pass")
        page.goto(f"{service.url}/homework/DIST101/config_annotation?lang=zh_CN")
        page.locator("#file").set_input_files(str(config))
        page.locator("form.upload button[type=submit]").click()
        page.wait_for_url(re.compile(r"/submissions/\d+$"))
        report_url = page.url
        deadline = time.monotonic() + 90
        while page.locator("#report[data-status=graded]").count() == 0:  # no JavaScript: reload
            assert time.monotonic() < deadline, "not graded in time"
            time.sleep(1)
            page.goto(report_url)
        ask = page.locator(f'[id="ask-{STAGE}"]')
        ask.locator("summary").click()
        ask.locator("textarea").fill("ZeRO-3 切分参数，我的注释写的是对的")
        assert page.evaluate("document.documentElement.scrollWidth") <= 377
        ask.locator("button").click()
        page.wait_for_load_state()
        assert "已于" in page.inner_text(f'[id="ask-{STAGE}"]')  # asked on <date>; waiting
        assert page.locator(f'[id="ask-{STAGE}"] form').count() == 0  # once per answer
    finally:
        student.close()
    teacher = browser.new_context(locale="en-US")
    page = teacher.new_page()
    try:
        login_as(page, service.url, "teacher", "teacher-pass")
        before = gradebook_total(page, service.url, "alice")
        page.goto(f"{service.url}/dashboard/DIST101/review/annotations?lang=en")
        group = page.locator(".rgroup", has_text="Asked by the student")
        assert "我的注释写的是对的" in group.inner_text()
        group.locator("button[value=full]").click()
        page.wait_for_load_state()
        after = gradebook_total(page, service.url, "alice")
        assert after > before
    finally:
        teacher.close()
    student = browser.new_context(locale="en-US")
    page = student.new_page()
    try:
        login_as(page, service.url, "alice", "alice-pass")
        page.goto(report_url + "?lang=en")
        assert "Confirmed by the teacher" in page.inner_text("ol.checks")
        assert float(page.inner_text(".score-num")) == pytest.approx(after)
    finally:
        student.close()
