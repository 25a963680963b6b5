"""Layout where layout is the point, in a real Chromium against gunicorn: the homework page of an
upload being regraded at 375 px, the live log panes, charts alone in a row, the quiz header.
The pages come from ``tests.server.ui.narrow_seed``; the words on them: ``tests/server/test_page_words.py``.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, Service, redis_server_flush
from tests.server.ui.test_small_screens import PHONE, WIDEST, _open, _page

pytestmark = pytest.mark.browser
LANGS = ["zh_CN", "en"]


@pytest.fixture(scope="module")
def site(tmp_path_factory, redis_server, demo_databases):
    tmp = tmp_path_factory.mktemp("narrow")
    redis_server_flush(redis_server)
    svc = Service(tmp, redis_server.url)
    svc.seed(demo_databases)
    out = subprocess.run([sys.executable, "-m", "tests.server.ui.narrow_seed"], cwd=REPO, env=svc.env, check=True,
                         capture_output=True, text=True).stdout
    svc.ids = json.loads(out.strip().splitlines()[-1])
    svc.start_web()
    yield svc
    svc.stop()


def _fits(page) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= PHONE, (page.url, width, page.evaluate(WIDEST))


@pytest.mark.parametrize("lang", LANGS)
def test_homework_page_during_a_regrade_fits_a_phone(site, browser, lang):
    """The homework page of a student whose upload was being regraded was 475 px wide at 375 px."""
    context, page = _page(browser, site, "bob", lang)
    try:
        _open(page, f"{site.url}/homework/DIST101/ddp_speedup", f"regrading-{lang}")
        _fits(page)
        _open(page, f"{site.url}/homework/")
        _fits(page)
    finally:
        context.close()


@pytest.mark.parametrize("lang", LANGS)
def test_live_log_panes_name_ranks_and_skip_silent_ones(site, browser, lang):
    """The live panes (rebuilt by status.js each second) were titled "n2.rank0", and a rank that
    printed nothing showed as an empty black box."""
    context, page = _page(browser, site, "alice", lang)
    try:
        _open(page, f"{site.url}/submissions/{site.ids['running']}")
        page.wait_for_selector("#logs pre[data-rank]", timeout=8000)  # the script's own panes
        titles = page.locator("#logs summary").all_inner_texts()
        assert titles == [{"zh_CN": "2 个进程，rank 0", "en": "2 processes, rank 0"}[lang]], titles
        assert page.locator("#logs pre").count() == 1
        _fits(page)
    finally:
        context.close()


def test_a_chart_alone_in_its_row_keeps_its_text_size(site, browser):
    """A chart alone in a row stretched to the full width, its labels scaled up with it."""
    context, page = _page(browser, site, "teacher", "en", width=1366)
    try:
        for key in ("stopped", "speed", "fsdp_card"):
            _open(page, f"{site.url}/submissions/{site.ids[key]}")
            heights = page.evaluate("""[...document.querySelectorAll('svg.chart text.tick')]
                .map(t => t.getBoundingClientRect().height)""")
            assert heights and max(heights) <= 20, (key, max(heights))
        page.set_viewport_size({"width": PHONE, "height": 900})
        _fits(page)
    finally:
        context.close()


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("width", [PHONE, 1366])
def test_the_quiz_score_stays_in_one_piece(site, browser, lang, width):
    """The attempt header split "0" from "/ 6" at 375 px and left a wide gap between them on a desktop."""
    context, page = _page(browser, site, "alice", lang, width=width)
    try:
        _open(page, f"{site.url}/quiz/attempt/{site.ids['practice_open']}")
        score, rest = page.evaluate("""(() => {
          const s = document.getElementById('attempt-score');
          const item = s.closest('.meta > *');
          const r = s.getBoundingClientRect();
          const range = document.createRange(); range.selectNodeContents(item);
          const rects = [...range.getClientRects()].filter(x => x.width > 0 && x.left >= r.right - 1 && Math.abs(x.top - r.top) < 4);
          return [item.innerText, rects.length ? rects[0].left - r.right : null]; })()""")
        assert "/ 6" in score, score
        assert rest is not None and rest < 12, (score, rest)
        if width == PHONE:
            _fits(page)
    finally:
        context.close()
