"""One graded quiz attempt, four of its written answers waiting for a teacher, seen in a real
Chromium against gunicorn in both languages at 1366 and 375 px: every page must tell the same
story about it (``tests.server.ui.story_seed`` stores it).

- The results page says what is confirmed, what waits (with the reading's suggestion) and what
  counts unconfirmed, as the attempt page and the quiz overview do; the sections to reread come
  from answers that are wrong or suggested short of full points, not from ones waiting at full.
- A graded quiz that holds its reference answers holds every line naming the answer: the worked
  formula of a wrong numeric answer is the answer.
- The navigator marks right, wrong and waiting answers apart (not a green tick on every one).

Screenshots go to $UI_SHOTS when set.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Service, redis_server_flush

pytestmark = pytest.mark.browser
WIDEST = """[...document.querySelectorAll('body *')].filter(e => !e.closest('.table-scroll')
  && e.getBoundingClientRect().right > innerWidth + 1)
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""
WORDS = {
    "en": {"waiting": "4 free-text answers wait for a teacher", "suggests": "suggested +3",
           "row": "suggested 1 / 1", "row_zero": "suggested 0 / 1", "unconfirmed": "3 of these points are unconfirmed",
           "zero": "Per-card memory under ZeRO"},
    "zh_CN": {"waiting": "4 份自由文本答案等待老师确认", "suggests": "建议 +3",
              "row": "建议 1 / 1", "row_zero": "建议 0 / 1", "unconfirmed": "其中 3 分尚未确认", "zero": "ZeRO 每卡显存"},
}
COUNT_ON = """
from server import create_app
from server.extensions import db
from server.models import Course
from server.quiz.waiting import set_count_unconfirmed
with create_app().app_context():
    set_count_unconfirmed(db.session.get(Course, {course}), {on})
    db.session.commit()
"""


@pytest.fixture(scope="module")
def story(tmp_path_factory, redis_server, demo_databases):
    tmp = tmp_path_factory.mktemp("story")
    redis_server_flush(redis_server)
    svc = Service(tmp, redis_server.url)
    svc.seed(demo_databases)
    out = subprocess.run([sys.executable, "-m", "tests.server.ui.story_seed"], cwd=REPO, env=svc.env, check=True,
                         capture_output=True, text=True).stdout
    svc.ids = json.loads(out.strip().splitlines()[-1])
    svc.start_web()
    yield svc
    svc.stop()


def _count_unconfirmed(svc, on: bool) -> None:
    subprocess.run([sys.executable, "-c", COUNT_ON.format(course=svc.ids["course"], on=on)], cwd=REPO, env=svc.env,
                   check=True, capture_output=True)


def _page(browser, svc, user: str, lang: str, width: int):
    context = browser.new_context(locale="zh-CN" if lang == "zh_CN" else "en-US",
                                  viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(f"{svc.url}/login?lang={lang}")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", f"{user}-pass")
    page.press("input[name=password]", "Enter")
    page.wait_for_load_state()
    return context, page


def _open(page, url: str, name: str) -> str:
    assert page.goto(url).status == 200, url
    assert page.evaluate("document.documentElement.scrollWidth") <= page.evaluate("innerWidth"), \
        (url, page.evaluate(WIDEST))
    shots = os.environ.get("UI_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{name}.png"), full_page=True)
    return page.inner_text("main")


@pytest.mark.parametrize("lang, width", [("zh_CN", 1366), ("zh_CN", 375), ("en", 1366), ("en", 375)])
def test_results_say_what_waits_and_what_it_would_add(story, browser, lang, width):
    """The results page said "4 / 10" and "waiting for the teacher" four times with no suggestion,
    and listed §1 to reread although its only answer waits at full points."""
    w, aid = WORDS[lang], story.ids["attempt"]
    context, page = _page(browser, story, "bob", lang, width)
    try:
        text = _open(page, f"{story.url}/quiz/attempt/{aid}/results", f"story-results-{lang}-{width}")
        card = page.locator(".score-card").inner_text()
        assert "4" in page.locator("#final-score").inner_text() and w["waiting"] in card and w["suggests"] in card
        rows = page.locator("tbody tr").all_inner_texts()
        assert sum(w["row"] in r for r in rows) == 3 and sum(w["row_zero"] in r for r in rows) == 1, rows
        reread = page.locator("#reread").inner_text()
        assert "§1" not in reread and "§2" in reread and "§3" in reread, reread
        overview = _open(page, f"{story.url}/quiz/ch7_3_graded/", f"story-overview-{lang}-{width}")
        assert w["waiting"] in overview
        assert text.count(w["waiting"]) == 1
    finally:
        context.close()


@pytest.mark.parametrize("lang", ["zh_CN", "en"])
def test_counted_unconfirmed_points_are_marked_on_the_results(story, browser, lang):
    """With "count unconfirmed" on the results page showed "7 / 10" with no mark while the
    overview said points were unconfirmed."""
    w, aid = WORDS[lang], story.ids["attempt"]
    _count_unconfirmed(story, True)
    context, page = _page(browser, story, "bob", lang, 1366)
    try:
        _open(page, f"{story.url}/quiz/attempt/{aid}/results", f"story-results-counted-{lang}")
        assert page.locator("#final-score").inner_text().strip() == "7"
        card = page.locator(".score-card").inner_text()
        assert w["unconfirmed"] in card and w["waiting"] in card, card
        overview = _open(page, f"{story.url}/quiz/ch7_3_graded/", f"story-overview-counted-{lang}")
        assert w["unconfirmed"] in overview
    finally:
        context.close()
        _count_unconfirmed(story, False)


@pytest.mark.parametrize("lang, width", [("zh_CN", 1366), ("zh_CN", 375), ("en", 1366), ("en", 375)])
def test_a_held_reference_holds_the_worked_answer_and_the_navigator_tells_right_from_wrong(story, browser, lang,
                                                                                         width):
    """A wrong ZeRO answer showed "per card = 2Ψ + 2Ψ + 12Ψ/N ... = 9 GB" above "reference answers
    are published after the quiz closes"; the navigator put a green tick on every answered question."""
    aid = story.ids["attempt"]
    context, page = _page(browser, story, "bob", lang, width)
    try:
        _open(page, f"{story.url}/quiz/attempt/{aid}", f"story-attempt-{lang}-{width}")
        card = page.locator("section.quizq", has=page.locator("h2", has_text=WORDS[lang]["zero"])).inner_text()
        assert "Ψ" not in card and " GB" not in card.split("1 GB", 1)[-1], card
        marks = page.locator("#quiz-jump a")
        kinds = [marks.nth(i).get_attribute("class") or "" for i in range(marks.count())]
        assert kinds.count("done ok") == 4, kinds  # four right
        assert kinds.count("done bad") == 2, kinds  # the ZeRO number and the symptom's cause
        assert kinds.count("done wait") == 4, kinds  # four written answers wait for a teacher
        labels = [marks.nth(i).get_attribute("aria-label") or "" for i in range(marks.count())]
        assert all(labels) and len({re.sub(r"\d+", "", t) for t in labels}) == 3, labels  # said, not only coloured
    finally:
        context.close()
