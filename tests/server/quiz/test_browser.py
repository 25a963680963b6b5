"""Take the self-test end to end in a real Chromium against gunicorn, in both languages and at
phone width, using only the keyboard to answer (Enter submits)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def _login(page, url: str, user: str = "alice", password: str = "alice-pass") -> None:
    page.goto(f"{url}/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.press("input[name=password]", "Enter")
    page.wait_for_load_state()


def _take_selftest(page, url: str, lang: str, answers: list[str]) -> str:
    page.goto(f"{url}/quiz/ch7_3_selftest/?lang={lang}")
    page.click("#start-quiz")
    for pos, text in enumerate(answers):
        page.focus(f"#a{pos}")
        page.keyboard.type(text)
        page.keyboard.press("Enter")
        page.wait_for_selector(f"#q{pos} .feedback")  # graded in place: no reload
        assert page.evaluate("document.activeElement.classList.contains('feedback')")
    page.click("#finish-quiz")
    page.wait_for_selector("#final-score")
    return page.inner_text("#final-score")


def test_selftest_in_english_and_chinese(service, page) -> None:
    service.start_web()
    _login(page, service.url)
    en = ["Data parallelism addresses throughput; model parallelism addresses capacity.",
          "One card with the large global batch, provided the data is split correctly and gradients are synchronised.",
          "ZeRO-1 shards optimizer states, ZeRO-2 also gradients, ZeRO-3 also parameters; FSDP full_shard is ZeRO-3.",
          "It frees GPU memory by moving states to CPU or NVMe, at the cost of speed.",
          "LoRA/QLoRA makes it fit on a single card.",
          "data parallel solves capacity, model parallel solves throughput"]  # the last one is a swap: zero
    assert _take_selftest(page, service.url, "en", en) == "5"
    assert "§2" in page.inner_text("#reread")  # question 6 (DDP sampler) was wrong
    zh = ["数据并行解决吞吐，模型并行解决容量", "等价于大 batch 单卡；前提是数据切分正确、梯度同步",
          "ZeRO-1 切优化器状态，ZeRO-2 加切梯度，ZeRO-3 连参数也切；FSDP full_shard = ZeRO-3",
          "用速度换显存：状态放到 CPU 内存或 NVMe", "LoRA/QLoRA 让单卡装得下", "没用 DistributedSampler，每卡吃全量数据"]
    assert _take_selftest(page, service.url, "zh_CN", zh) == "6"
    assert "满分" in page.content() or "Full marks" in page.content()
    page.goto(f"{service.url}/quiz/ch7_3_selftest/")
    assert page.locator("table.table tbody tr").count() == 2  # attempt history


def test_numeric_unit_confusion_at_phone_width(service, browser) -> None:
    service.start_web()
    context = browser.new_context(locale="en-US", viewport={"width": 360, "height": 740})
    page = context.new_page()
    try:
        _login(page, service.url)
        page.goto(f"{service.url}/quiz/ch7_3_practice/?lang=en")
        page.click("#start-quiz")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 362, f"horizontal scroll at phone width: {width}px"
        card = page.locator("section.quizq", has_text="Full-parameter training of a").first
        field = card.locator("input[name=answer]")
        field.fill("NaN")
        field.press("Enter")
        page.wait_for_selector("[role=alert]")
        assert page.evaluate("document.activeElement.name") == "answer"  # focus returns to the field
        page.keyboard.press("Control+A")
        page.keyboard.type("1 GB")
        page.keyboard.press("Enter")
        page.wait_for_selector(".feedback", timeout=8000, state="attached")
        assert page.locator(".feedback").count() == 1
        assert page.locator("[role=alert]").count() == 0  # the fixed card replaced the one with the error
        page.reload()  # the stored answer survives a reload, and the page still fits the phone
        assert page.locator(".feedback").count() == 1
        assert page.evaluate("document.documentElement.scrollWidth") <= 362
    except Exception:
        page.screenshot(path="/tmp/quiz_phone.png")
        print("URL", page.url)
        raise
    finally:
        context.close()


def test_quiz_works_without_javascript(service, browser) -> None:
    service.start_web()
    context = browser.new_context(locale="en-US", java_script_enabled=False)
    page = context.new_page()
    try:
        _login(page, service.url)
        page.goto(f"{service.url}/quiz/ch7_3_selftest/?lang=en")
        page.click("#start-quiz")
        page.fill("#a0", "Data parallelism is for throughput, model parallelism for capacity.")
        with page.expect_navigation():  # a plain form post, then the page again
            page.click("#q0 button")
        assert page.locator("#q0 .feedback.ok").count() == 1
        assert page.inner_text("#attempt-score") == "1"
        assert page.locator("form.qform").count() == 5
    finally:
        context.close()


UNSURE_EN = "Both are about using more GPUs and they make things faster for big models"  # the rubric is unsure


def _student_answers_unsure(browser, url: str, user: str, password: str) -> None:
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    page.on("dialog", lambda d: d.accept())  # "N unanswered; this uses attempt 1 of 3": yes
    try:
        _login(page, url, user, password)
        page.goto(f"{url}/quiz/ch7_3_graded/?lang=en")
        page.click("#start-quiz")
        page.focus("#a0")
        page.keyboard.type(UNSURE_EN)
        page.keyboard.press("Enter")
        page.wait_for_selector("#q0 .feedback.wait")
        assert "Waiting for the teacher" in page.inner_text("#q0")
        page.click("#finish-quiz")
        page.wait_for_selector("#final-score")
        assert page.inner_text("#final-score") == "0"
    finally:
        context.close()


def test_review_queue_grouped_decision_updates_every_student_and_the_gradebook(service, browser) -> None:
    """Two students write the same answer the rubric is unsure of; the teacher, on a phone, in
    Chinese, grades the group with one key; both scores and the gradebook follow (then English)."""
    service.start_web()
    for user, pw in (("alice", "alice-pass"), ("bob", "bob-pass")):
        _student_answers_unsure(browser, service.url, user, pw)
    context = browser.new_context(locale="zh-CN", viewport={"width": 375, "height": 800})
    page = context.new_page()
    try:
        _login(page, service.url, "teacher", "teacher-pass")
        page.goto(f"{service.url}/dashboard/DIST101/review/?lang=zh_CN")
        page.click("#review-queue a")
        page.wait_for_selector(".rgroup")
        assert page.locator(".rgroup").count() == 1 and "2 条相似答案" in page.inner_text(".rgroup h2")
        assert page.evaluate("document.documentElement.scrollWidth") <= 377
        page.keyboard.press("f")  # the focused group: full marks for both
        page.wait_for_selector("#review-empty")
        page.goto(f"{service.url}/dashboard/DIST101/?lang=en")
        for user in ("alice", "bob"):
            assert page.inner_text(f"tr:has(a:text-is('{user}')) td.total").strip() == "1"
        page.goto(f"{service.url}/dashboard/DIST101/review/?lang=en")
        assert "Nothing is waiting for review." in page.inner_text("main")
    finally:
        context.close()


def test_a_partial_score_typed_in_the_review_queue_saves_that_score(service, browser) -> None:
    """The page's own hint: P, type points, Enter. Enter submitted the form's first button ("full
    marks"), so 0.5 saved as 1 / 1 "confirmed by a teacher". In Chinese (alice) and English (bob)."""
    service.start_web()
    for user, pw in (("alice", "alice-pass"), ("bob", "bob-pass")):
        _student_answers_unsure(browser, service.url, user, pw)
    for lang, locale, hint, typed, user, total in (
            ("zh_CN", "zh-CN", "P 输入部分分（回车保存）", "0.5", "alice", "0.5"),
            ("en", "en-US", "P partial points (Enter saves)", "0.25", "bob", "0.25")):
        context = browser.new_context(locale=locale)
        page = context.new_page()
        try:
            _login(page, service.url, "teacher", "teacher-pass")
            page.goto(f"{service.url}/dashboard/DIST101/review/?lang={lang}")
            page.click("#review-queue a")
            page.wait_for_selector(".rgroup")
            assert hint in page.inner_text("#review-keys")
            other = page.locator(".rgroup .ritems input[type=checkbox]")
            if other.count() > 1:  # grade alice alone first
                page.locator(".rgroup .ritems label:has-text('bob') input[type=checkbox]").uncheck()
            page.keyboard.press("p")
            page.keyboard.type(typed)
            with page.expect_navigation():
                page.keyboard.press("Enter")
            page.goto(f"{service.url}/dashboard/DIST101/?lang=en")
            assert page.inner_text(f"tr:has(a:text-is('{user}')) td.total").strip() == total
        finally:
            context.close()
