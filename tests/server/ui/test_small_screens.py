"""Small screens in a real Chromium against gunicorn: what students read, one language per page, and
375 px. Each test names the defect it guards; the pages come from ``tests.server.ui.pages_seed``
(reports shaped like the real graders', bob's graded quiz attempt answered by the real code).

One gunicorn and one browser for the module; several checks per page load. Screenshots go to
$UI_SHOTS when set.
"""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Service, redis_server_flush

pytestmark = pytest.mark.browser
PHONE = 375
LANGS = ["zh_CN", "en"]
WIDEST = """[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1)
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""


@pytest.fixture(scope="module")
def site(tmp_path_factory, redis_server, demo_databases):
    tmp = tmp_path_factory.mktemp("pages")
    redis_server_flush(redis_server)
    svc = Service(tmp, redis_server.url)
    svc.seed(demo_databases)
    out = subprocess.run([sys.executable, "-m", "tests.server.ui.pages_seed"], cwd=REPO, env=svc.env, check=True,
                         capture_output=True, text=True).stdout
    svc.ids = json.loads(out.strip().splitlines()[-1])
    svc.start_web()
    yield svc
    svc.stop()


def _page(browser, site, user: str, lang: str, width: int = PHONE):
    context = browser.new_context(locale="zh-CN" if lang == "zh_CN" else "en-US",
                                  viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(f"{site.url}/login?lang={lang}")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", f"{user}-pass")
    page.press("input[name=password]", "Enter")
    page.wait_for_load_state()
    return context, page


def _open(page, url: str, name: str = "") -> None:
    assert page.goto(url).status == 200, url
    for d in page.locator("main details").all()[:40]:
        d.evaluate("e => e.open = true")
    shots = os.environ.get("UI_SHOTS")
    if shots and name:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{name}.png"), full_page=True)


def _fits(page) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= PHONE, (page.url, width, page.evaluate(WIDEST))


@pytest.mark.parametrize("lang", LANGS)
def test_homework2_report_and_integrity_page_fit_a_phone(site, browser, lang):
    """Homework 2's report was 604 px wide (long field paths in check titles), the integrity page
    405 px and more (long event details)."""
    context, page = _page(browser, site, "teacher", lang)
    try:
        for path, name in ((f"/submissions/{site.ids['config']}", "hw2-report"),
                           ("/dashboard/DIST101/integrity", "integrity")):
            _open(page, site.url + path, f"{name}-{lang}")
            _fits(page)
    finally:
        context.close()


@pytest.mark.parametrize("lang", LANGS)
def test_gradebook_cells_are_not_cut_by_the_sticky_total(site, browser, lang):
    """At 375 px the sticky total column covered part of the cell beside it ("99.7" of 99.75)."""
    context, page = _page(browser, site, "teacher", lang)
    try:
        _open(page, f"{site.url}/dashboard/DIST101/", f"gradebook-{lang}")
        cut = page.evaluate("""(() => {
          const out = [];
          for (const row of document.querySelectorAll('table.gradebook tr')) {
            const cells = [...row.children];
            const stickies = cells.filter(c => getComputedStyle(c).position === 'sticky' && c.cellIndex > 0);
            for (const s of stickies) {
              const edge = s.getBoundingClientRect().left;
              for (const c of cells) {
                if (c === s || getComputedStyle(c).position === 'sticky') continue;
                const r = c.getBoundingClientRect();
                if (r.left < edge - 1 && r.right > edge + 1) out.push(c.innerText.trim().slice(0, 20));
              }
            }
          }
          return out; })()""")
        assert not cut, cut
    finally:
        context.close()


def _chart_problems(page) -> dict:
    """Chart texts outside their SVG, and legend entries that overlap, on the current page."""
    return page.evaluate("""(() => {
      const out = {outside: [], overlap: []};
      for (const svg of document.querySelectorAll('svg.chart')) {
        const box = svg.getBoundingClientRect();
        const texts = [...svg.querySelectorAll('text')];
        for (const t of texts) {
          const r = t.getBoundingClientRect();
          if (r.width && (r.left < box.left - 1 || r.right > box.right + 1)) out.outside.push(t.textContent);
        }
        const legend = texts.filter(t => t.getAttribute('text-anchor') === 'start' && t.previousElementSibling
                                         && t.previousElementSibling.tagName === 'rect' && !t.classList.contains('val'));
        const items = legend.map(t => [t, t.previousElementSibling]);
        for (let i = 0; i < items.length; i++) for (let j = i + 1; j < items.length; j++) {
          const a = items[i][0].getBoundingClientRect(), b = items[j][0].getBoundingClientRect();
          const bSwatch = items[j][1].getBoundingClientRect();
          const sameRow = Math.abs(a.top - b.top) < 2;
          if (sameRow && a.right > Math.min(b.left, bSwatch.left) + 0.5)
            out.overlap.push(items[i][0].textContent + ' / ' + items[j][0].textContent);
        }
      }
      return out; })()""")


@pytest.mark.parametrize("lang", LANGS)
def test_chart_labels_stay_inside_and_legends_do_not_overlap(site, browser, lang):
    """Homework 3's capacity label was cut ("160.0 Mi"); the loss legend's entries overlapped in Chinese."""
    context, page = _page(browser, site, "teacher", lang)
    try:
        for key in ("speed", "fsdp_card"):
            _open(page, f"{site.url}/submissions/{site.ids[key]}", f"charts-{key}-{lang}")
            problems = _chart_problems(page)
            assert problems == {"outside": [], "overlap": []}, (key, problems)
    finally:
        context.close()


@pytest.mark.parametrize("lang", LANGS)
def test_waiting_answers_show_an_icon_that_renders(site, browser, lang):
    """The ⏳ glyph rendered as a box (no installed font has it): the page ships its own icon."""
    context, page = _page(browser, site, "bob", lang)
    try:
        aid = site.ids["quiz_attempt"]
        for path in (f"/quiz/attempt/{aid}", f"/quiz/attempt/{aid}/results"):
            _open(page, site.url + path, f"wait-icon-{lang}")
            assert "⏳" not in page.content()
            icon = page.locator("svg.icon-wait").first
            box = icon.bounding_box()
            assert box and box["width"] >= 8 and box["height"] >= 8, path
    finally:
        context.close()


def test_queue_column_of_counts_is_not_headed_start_time(site, browser):
    """The queue page's count of gradings started was headed "开始时间" (start time)."""
    context, page = _page(browser, site, "teacher", "zh_CN")
    try:
        _open(page, f"{site.url}/dashboard/DIST101/queue")
        header = page.locator("#queue-waits thead th").nth(1).inner_text()
        assert "时间" not in header and "次数" in header, header
        _fits(page)
    finally:
        context.close()


CHOICE = {"zh_CN": "你的答案", "en": "Your answer"}


@pytest.mark.parametrize("lang", LANGS)
def test_choice_answers_show_the_options_text(site, browser, lang):
    """Choice answers showed option ids ("你的答案: tensor,data", "no_rank0")."""
    aid = site.ids["quiz_attempt"]
    context, page = _page(browser, site, "bob", lang)
    try:
        _open(page, f"{site.url}/quiz/attempt/{aid}", f"attempt-{lang}")
        answers = [line.split(":", 1)[1].strip() for line in
                   page.locator("section.quizq .feedback p.muted").all_inner_texts() if line.startswith(CHOICE[lang] + ":")]
        assert answers, "no answer shown"
        option_ids = set(json.loads(subprocess.run([sys.executable, "-c", _OPTION_IDS], cwd=REPO, env=site.env,
                                                   check=True, capture_output=True, text=True).stdout))
        for text in answers:
            parts = {t.strip() for t in text.replace("；", ";").replace(",", ";").split(";")}
            assert not parts & option_ids, text
        _fits(page)
    finally:
        context.close()


@pytest.mark.parametrize("lang", LANGS)
def test_ask_a_teacher_only_where_it_can_help_and_in_the_pages_language(site, browser, lang):
    """"Ask a teacher" was offered on answers already fully right, and after the page had been seen
    in Chinese the English page kept the Chinese form (and the reverse)."""
    aid = site.ids["quiz_attempt"]
    context, page = _page(browser, site, "bob", "zh_CN" if lang == "en" else "en")
    try:
        _open(page, f"{site.url}/quiz/attempt/{aid}")  # the other language first: its form is cached
        page.goto(f"{site.url}/quiz/attempt/{aid}?lang={lang}")  # then switch
        _open(page, f"{site.url}/quiz/attempt/{aid}", f"ask-{lang}")
        for card in page.locator("section.quizq").all():
            pos = card.get_attribute("id")[1:]
            full = card.locator(".feedback.ok").count() == 1
            assert not (full and page.locator(f"#r{pos}").count()), f"ask offered on fully right q{pos}"
        forms = page.locator("details.ask-review summary").all_inner_texts()
        assert forms, "no written answer offers the teacher"
        for summary in forms:
            assert ("ask a teacher" in summary) == (lang == "en"), summary
    finally:
        context.close()


_OPTION_IDS = """
import json
import re
from coursework.quiz.bank import all_question_ids, load_question
ids = set()
for qid in all_question_ids():
    q = load_question(qid)
    ids |= {o["id"] for o in q.info.get("options", []) + q.info.get("items", [])}
print(json.dumps(sorted(i for i in ids if len(i) > 2)))
"""


STATES = {"zh_CN": {"waiting": "等待老师", "skipped": "已跳过", "replaced": "已替换"},
          "en": {"waiting": "Waiting for the teacher", "skipped": "Skipped", "replaced": "Replaced"}}


@pytest.mark.parametrize("lang", LANGS)
def test_manual_cells_wait_and_evidence_reads_as_words(site, browser, lang):
    """Manual cells waiting for the teacher were badged "skipped"; evidence keys showed raw
    ("Idle 1", "Ratio n", "Normalised uncapped", "Allowed missing"); the kernel's log block was
    titled "Kernel" (the card's name in Chinese messages: tests/graders/test_fsdp_fit.py)."""
    t = STATES[lang]
    context, page = _page(browser, site, "bob", lang)
    try:
        _open(page, f"{site.url}/submissions/{site.ids['notebook']}", f"notebook-{lang}")
        badges = page.locator("li.check[class*=check-] .badge").all_inner_texts()
        titles = page.locator("li.check .check-title").all_inner_texts()
        manual = [b for b, title in zip(badges, titles) if "explain_" in title]
        assert manual and all(t["waiting"].lower() in b.lower() for b in manual), manual
        logs = page.locator("#logs-h ~ details summary").all_inner_texts()
        assert logs and not any(s.strip().lower() == "kernel" for s in logs), logs
        _open(page, f"{site.url}/submissions/{site.ids['speed']}", f"speed-{lang}")
        text = page.inner_text("main")
        for raw in ("Idle 1", "Ratio n", "Ref t1", "Normalised uncapped", "Allowed missing", "Load dependent"):
            assert raw not in text, raw
        _fits(page)
    finally:
        context.close()


ALLREDUCE = {"zh_CN": ("carol", "一次 all-reduce 要多久", "请带上单位"), "en": ("alice", "How long one all-reduce takes", "Add a unit")}


@pytest.mark.parametrize("lang", LANGS)
def test_a_bare_number_of_seconds_is_an_answer(site, browser, lang):
    """The question asks "约需多少秒" yet refused "0.56" with "请带上单位"."""
    user, title, refusal = ALLREDUCE[lang]
    context, page = _page(browser, site, user, lang)
    try:
        page.goto(f"{site.url}/quiz/ch7_3_graded/")
        page.click("#start-quiz")
        card = page.locator("section.quizq", has_text=title).first
        field = card.locator("input[name=answer]")
        field.fill("0.56")
        field.press("Enter")
        card = page.locator("section.quizq", has_text=title).first
        card.locator(".feedback, [role=alert]").first.wait_for(timeout=8000)
        assert card.locator(".feedback").count() == 1, card.inner_text()
        assert refusal not in card.inner_text()
        _fits(page)
    finally:
        context.close()


@pytest.mark.parametrize("lang", LANGS)
def test_scores_audit_reasons_and_queue_states_read_plainly(site, browser, lang):
    """Scores with four decimals (0.8333) beside two-decimal means; the audit log's reasons and the
    queue's "replaced" state were raw English on Chinese pages."""
    context, page = _page(browser, site, "teacher", lang)
    try:
        for path in ("/dashboard/DIST101/students/bob", "/dashboard/DIST101/", "/dashboard/DIST101/quiz/ch7_3_graded"):
            _open(page, site.url + path)
            text = page.inner_text("main")
            assert not re.search(r"(?<![\d.])\d+\.\d{3,}(?![\d.])", text), (path, re.findall(r"\d+\.\d{3,}", text))
        _open(page, f"{site.url}/dashboard/DIST101/audit", f"audit-{lang}")
        reasons = page.locator("table tbody tr td:nth-child(6)").all_inner_texts()
        accepted = {"zh_CN": "已接受: ", "en": "Accepted: "}[lang]
        assert any(r.startswith(accepted) for r in reasons), reasons
        _open(page, f"{site.url}/dashboard/DIST101/queue", f"queue-{lang}")
        states = [s.strip() for s in page.locator("#db-h ~ dl.facts dt").all_inner_texts()]
        assert STATES[lang]["replaced"].lower() in [s.lower() for s in states], states
        assert "replaced" not in [s.lower() for s in states] or lang == "en"
        _fits(page)
    finally:
        context.close()
