"""The dashboard in a real Chromium against gunicorn, as the demo instructor: every view in
English and Chinese, at desktop and phone width, sorting and overriding by keyboard only.
Screenshots go to $DASHBOARD_SHOTS (default: the test's tmp dir) for people to look at."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Service, redis_server_flush

pytestmark = pytest.mark.browser

VIEWS = [  # (path, English heading text, Chinese heading text)
    ("/dashboard/BENCH/", "Gradebook", "成绩册"),
    ("/dashboard/BENCH/students/stu00003", "Quiz attempts", "测验作答"),
    ("/dashboard/BENCH/homework/bench_hw01", "Checks failed, by check id", "按检查项统计未通过情况"),
    ("/dashboard/BENCH/quiz/ch7_3_graded", "Quiz statistics", "测验统计"),
    ("/dashboard/BENCH/queue", "Grading queue", "评分队列"),
    ("/dashboard/BENCH/audit", "Audit log", "审计日志"),
]


# The outermost elements sticking out past the viewport, to name the culprit when the width test fails.
WIDEST = """[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1
  ).slice(0, 5)
  .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""


def _seed_and_start(service: Service) -> Service:
    subprocess.run([sys.executable, "-m", "bench.seed_gradebook", "--students", "40", "--reports"], cwd=REPO,
                   env=service.env, check=True, capture_output=True)
    service.start_web()
    return service


@pytest.fixture
def dashboard_service(service):
    """A fresh seeded service, for a test that changes what it shows (an override, a manual score, a regrade)."""
    return _seed_and_start(service)


@pytest.fixture(scope="module")
def dashboard_view(tmp_path_factory, redis_server):
    """One seeded service for the tests that only look (the read-only views and charts): seeding 40
    students and starting gunicorn took 6-20 s per test, and a read changes nothing another test sees."""
    redis_server_flush(redis_server)
    svc = Service(tmp_path_factory.mktemp("dashboard"), redis_server.url)
    svc.seed()
    yield _seed_and_start(svc)
    svc.stop()


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("DASHBOARD_SHOTS", tmp_path / "shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _login(page, url: str) -> None:
    page.goto(f"{url}/login")
    page.fill("input[name=username]", "teacher")
    page.fill("input[name=password]", "teacher-pass")
    page.press("input[name=password]", "Enter")
    page.wait_for_load_state()


@pytest.mark.parametrize("lang, width", [("en", 1280), ("zh_CN", 1280), ("en", 375), ("zh_CN", 375)])
def test_every_view_in_both_languages_and_widths(dashboard_view, browser, tmp_path, lang, width):
    context = browser.new_context(locale="zh-CN" if lang == "zh_CN" else "en-US",
                                  viewport={"width": width, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(r.url))  # everything is served locally
    try:
        _login(page, dashboard_view.url)
        for path, en, zh in VIEWS:
            resp = page.goto(f"{dashboard_view.url}{path}?lang={lang}")
            assert resp.status == 200, path
            assert (en if lang == "en" else zh) in page.inner_text("main"), path
            assert page.evaluate("document.documentElement.lang") == ("en" if lang == "en" else "zh-CN")
            # Wide tables scroll inside their card; the page itself never scrolls sideways.
            assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, (path, width, page.evaluate(
                WIDEST))
            name = path.strip("/").replace("/", "_") or "index"
            page.screenshot(path=str(_shots(tmp_path) / f"{name}-{lang}-{width}.png"), full_page=True)
        assert not errors, errors
    finally:
        context.close()


def test_charts_are_inline_svg(dashboard_view, page):
    _login(page, dashboard_view.url)
    page.goto(f"{dashboard_view.url}/dashboard/BENCH/homework/bench_hw01?lang=en")
    assert page.locator("svg.chart").count() == 4  # scores, failures per check, speed-ups, memory per rank
    assert "sampler.reshuffle" in page.inner_text("table")


def test_sort_and_override_by_keyboard(dashboard_service, page):
    _login(page, dashboard_service.url)
    page.goto(f"{dashboard_service.url}/dashboard/BENCH/?lang=en")
    page.keyboard.press("Tab")  # the skip link comes first
    assert page.evaluate("document.activeElement.className") == "skip"
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()").startswith("Total"):
            break
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "sort=total" in page.url
    totals = [float(t) for t in page.locator("td.total").all_inner_texts()]
    assert totals == sorted(totals)
    page.goto(f"{dashboard_service.url}/dashboard/BENCH/students/stu00003?lang=en")
    page.focus("#score-1")
    page.keyboard.type("77")
    page.keyboard.press("Tab")
    page.keyboard.type("re-ran after the sampler fix")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "recorded in the audit log" in page.inner_text("main")
    page.goto(f"{dashboard_service.url}/dashboard/BENCH/audit?lang=en")
    assert "re-ran after the sampler fix" in page.inner_text("main")


@pytest.mark.parametrize("lang, saved, queued", [("en", "Cell q1 graded.", "0 of 1 finished"),
                                                 ("zh_CN", "单元格 q1 已评分。", "已完成 0 / 1")])
def test_manual_cell_and_regrade_from_the_student_page(dashboard_service, page, tmp_path, lang, saved, queued):
    _login(page, dashboard_service.url)
    page.goto(f"{dashboard_service.url}/dashboard/BENCH/students/stu00005?lang={lang}")
    sub = page.locator("details.sub-detail", has=page.locator("a[href$='/manual']")).first
    sub.locator("> summary").click()
    sub.locator("a[href$='/manual']").click()
    page.wait_for_selector("#cell-q1")
    assert "stage 3 shards parameters" in page.inner_text("#cell-q1 pre")
    page.fill("#score-1", "4")
    page.fill("#comment-1", "names all three states")
    with page.expect_navigation():
        page.press("#score-1", "Enter")
    assert saved in page.inner_text("main")
    page.screenshot(path=str(_shots(tmp_path) / f"manual-{lang}.png"), full_page=True)
    page.goto(f"{dashboard_service.url}/dashboard/BENCH/students/stu00005?lang={lang}")
    first = page.locator("details.sub-detail").first
    first.locator("> summary").click()
    with page.expect_navigation():
        first.locator("form.regrade-form button").click()
    assert queued in page.inner_text("main")  # no worker runs here: it waits in the normal queue
    page.screenshot(path=str(_shots(tmp_path) / f"regrade-{lang}.png"), full_page=True)
