"""Similarity end to end in a real Chromium against gunicorn and a real worker: two
students hand in homework 2 configs, one with the other's annotations; the teacher (phone width)
runs the check, the worker runs it after the gradings, the teacher views the pair side by side
and opens an integrity review from it; the review page shows the evidence."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.server.dashboard.test_annotation_review_browser import login_as

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COPIED = Path(__file__).resolve().parents[3] / "assignments" / "config_annotation" / "similarity" / "copied"


def _upload(browser, url: str, user: str, path: Path) -> None:
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    try:
        login_as(page, url, user, f"{user}-pass")
        page.goto(f"{url}/homework/DIST101/config_annotation?lang=en")
        page.locator("#file").set_input_files(str(path))
        page.locator("form.upload button[type=submit]").click()
        page.wait_for_url(re.compile(r"/submissions/\d+$"))
        page.wait_for_selector("#report[data-status=graded]", timeout=60000)
    finally:
        context.close()


def test_teacher_runs_the_check_views_a_pair_and_opens_a_review(service, browser) -> None:
    service.start_web()
    service.start_worker()
    _upload(browser, service.url, "alice", COPIED / "first.yaml")
    _upload(browser, service.url, "bob", COPIED / "second.yaml")
    context = browser.new_context(locale="en-US", viewport={"width": 375, "height": 800})
    page = context.new_page()
    try:
        login_as(page, service.url, "teacher", "teacher-pass")
        page.goto(f"{service.url}/dashboard/DIST101/similarity?hw=config_annotation&lang=en")
        with page.expect_navigation():
            page.click("form.sim-run button")
        for _ in range(60):  # the worker takes the run once no first grading waits
            if page.locator("table.sim-pairs a.sim-open").count():
                break
            page.wait_for_timeout(1000)
            page.reload()
        wide = page.evaluate("""[...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > 377)
            .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).slice(0, 12)""")
        assert page.evaluate("document.documentElement.scrollWidth") <= 377, wide
        with page.expect_navigation():
            page.click("table.sim-pairs a.sim-open")
        assert page.locator(".sim-code mark").count() >= 2
        assert "Why this pair is listed" in page.inner_text(".sim-why") and page.locator(".sim-block-code").count() == 2
        assert "全分片" not in page.inner_text("h1") and "ZeRO-3" in page.inner_text(".sim-side")
        assert page.evaluate("document.documentElement.scrollWidth") <= 377
        page.fill("#reason", "the same annotations, reordered")
        with page.expect_navigation():
            page.click("form.review-form button")
        assert page.url.endswith("/dashboard/DIST101/integrity")
        text = page.inner_text("main")
        assert "Waiting for a decision: 2" in text and "similarity run #" in text
    finally:
        context.close()
