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
