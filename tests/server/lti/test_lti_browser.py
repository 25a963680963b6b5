"""The issue-24 walk in a real Chromium against gunicorn and a real worker, with the test platform
(tests/server/lti/platform.py) as the LMS over real HTTP: an instructor registers the platform on
its page, launches from the LMS, creates the course and places homework 2 by deep linking; a
student launches from the placed link, submits, and the counted score reaches the platform's line
item through the worker's passback queue; a release date hides the score until it passes; a
regrade request is answered and the student sees the answer."""
from __future__ import annotations

import re
import time
from datetime import timedelta
from urllib.parse import urlencode

import pytest
import requests

from server.models import utcnow
from tests.server.dashboard.test_annotation_review_browser import login_as
from tests.server.lti.platform import Platform

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HW = "config_annotation"
CONFIG = ('{\n  "zero_optimization": {\n    // ZeRO-3 shards parameters, gradients and optimizer states\n'
          '    "stage": 3\n  },\n  "train_batch_size": 64\n}\n')


def _wait(predicate, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not in time"
        time.sleep(0.5)


def _launch(page, service, platform: Platform) -> None:
    """The LMS opens the tool: third-party initiated login, the platform's form_post, the launch."""
    query = urlencode({"iss": platform.issuer, "login_hint": "hint", "client_id": platform.client_id,
                       "target_link_uri": f"{service.url}/lti/launch"})
    page.goto(f"{service.url}/lti/login?{query}")
    page.wait_for_url(re.compile(re.escape(service.url) + r"/(?!lti/login)"))
    page.wait_for_load_state()


def test_register_place_launch_submit_passback_release_regrade(service, browser, tmp_path) -> None:
    service.start_web()
    service.start_worker()
    platform = Platform().start()
    try:
        _walk(service, browser, tmp_path, platform)
    finally:
        platform.stop()


def _walk(service, browser, tmp_path, platform: Platform) -> None:
    teacher = browser.new_context(locale="en-US")
    page = teacher.new_page()
    login_as(page, service.url, "teacher", "teacher-pass")  # a local account registers the LMS
    page.goto(f"{service.url}/lti/platforms?lang=en")
    for name, value in (("issuer", platform.issuer), ("client_id", platform.client_id),
                        ("login_url", platform.url + "/auth"), ("token_url", platform.url + "/token"),
                        ("jwks_url", platform.url + "/jwks"), ("deployments", platform.deployment)):
        page.fill(f"#{name}", value)
    page.click("#register-platform")
    page.wait_for_load_state()
    assert platform.issuer in page.inner_text("main")
    platform.tool_jwks = requests.get(f"{service.url}/lti/jwks.json", timeout=10).json()  # pasted into the LMS
    teacher.close()

    lms_teacher = browser.new_context(locale="en-US")  # the instructor as the LMS knows them: no local password
    page = lms_teacher.new_page()
    platform.user = {"sub": "t-1", "name": "Prof. Wang", "role": "Instructor"}
    platform.next_deep_link = True
    _launch(page, service, platform)
    page.click("#create-course")
    page.wait_for_url(re.compile(r"/lti/DDP101/deep-link"))
    page.check(f"input[value='hw:{HW}']")
    page.click("#deep-link-place")
    _wait(lambda: platform.placed, "deep-linking reply")
    assert platform.placed[0]["custom"] == {"item": f"hw:{HW}"} and len(platform.lineitems) == 1

    student = browser.new_context(locale="en-US")
    spage = student.new_page()
    platform.user = {"sub": "s-7", "name": "Li Lei", "role": "Learner"}
    platform.custom = platform.placed[0]["custom"]  # the placed link's custom parameters
    _launch(spage, service, platform)
    assert spage.url.split("?")[0].endswith(f"/homework/DDP101/{HW}")
    config = tmp_path / "ds_config.json"
    config.write_text(CONFIG, encoding="utf-8")
    spage.locator("#file").set_input_files(str(config))
    spage.locator("form.upload button[type=submit]").click()
    spage.wait_for_url(re.compile(r"/submissions/\d+$"))
    report_url = spage.url
    spage.wait_for_selector("#report[data-status=graded]", timeout=120_000)
    shown = float(spage.inner_text(".score-num"))
    _wait(lambda: platform.scores, "passback to the line item")
    line = next(iter(platform.scores.values()))
    assert line["s-7"]["scoreGiven"] == pytest.approx(shown) and len(platform.lineitems) == 1

    # a release date: the score is hidden until the (last) deadline passes
    page.goto(f"{service.url}/dashboard/DDP101/homework/{HW}?lang=en")
    page.fill("#deadline", (utcnow() + timedelta(days=1)).strftime("%Y-%m-%d %H:%M"))
    page.locator("#settings button").click()
    page.wait_for_load_state()
    page.select_option("#release-mode", "after_deadline")
    page.locator("#release form").first.locator("button").click()
    page.wait_for_load_state()
    assert "Held back" in page.inner_text("#release")
    spage.goto(report_url + "?lang=en")
    assert "not been released" in spage.inner_text("#report") and spage.locator(".score-num").count() == 0
    page.fill("#deadline", (utcnow() - timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M"))
    page.locator("#settings button").click()
    page.wait_for_load_state()
    spage.goto(report_url + "?lang=en")
    assert float(spage.inner_text(".score-num")) == pytest.approx(shown)

    # a regrade request, answered with new points and a reply
    ask = spage.locator("li.check:not(.check-pass) details.regrade-ask").first  # a check that lost points
    ask.locator("summary").click()
    ask.locator("textarea").fill("My config names 4 cards on purpose")
    ask.locator("button").click()
    spage.wait_for_load_state()
    assert "waiting for the teacher" in spage.inner_text("#report")
    page.goto(f"{service.url}/dashboard/DDP101/regrade-requests?lang=en")
    card = page.locator("section[data-request]").first
    assert "My config names 4 cards on purpose" in card.inner_text()
    top = float(card.locator("input[name=points]").get_attribute("max"))
    card.locator("input[name=points]").fill(f"{top:g}")
    card.locator("textarea").fill("Agreed, full points.")
    card.locator("button[value=score]").click()
    page.wait_for_load_state()
    spage.goto(report_url + "?lang=en")
    assert "Agreed, full points." in spage.inner_text("#report")
    now = float(spage.inner_text(".score-num"))
    assert now > shown
    _wait(lambda: next(iter(platform.scores.values()))["s-7"]["scoreGiven"] == pytest.approx(now),
          "the changed grade re-sent")
    assert len(platform.lineitems) == 1
    student.close()
    lms_teacher.close()
