"""The teacher's decide buttons (full / zero / partial, keys F Z P) have one home, the
``decide_form`` macro in ``dashboard/_decide.html``, used by both review pages: the quiz's
free-text groups and homework 2's annotation groups."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

TEMPLATES = Path(__file__).resolve().parents[3] / "server" / "templates" / "dashboard"


@pytest.mark.parametrize("page", ["review_annotation.html", "review_question.html"])
def test_each_review_page_takes_its_buttons_from_the_macro(page: str) -> None:
    source = (TEMPLATES / page).read_text(encoding="utf-8")
    assert re.search(r"from 'dashboard/_decide.html' import decide_form", source), page
    assert 'name="verdict"' not in source and "data-key" not in source and "rpoints" not in source, page


def _form(html: str) -> str:
    return re.search(r'<form[^>]*class="rdecide"[^>]*>.*?</form>', html, re.S).group(0)


def _buttons(form: str) -> list[tuple[str, str]]:
    return re.findall(r'<button class="[^"]*" name="verdict" value="(\w+)"(?: data-key="(\w)")?', form)


@pytest.fixture
def render(tmp_path):
    from flask import render_template

    from server import create_app

    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'x.db'}",
                      "REDIS_URL": None, "VAR_DIR": str(tmp_path / "var"), "SECRET_KEY": "test-only-0123456789abcdef"})

    def go(page: str, lang: str = "en", **ctx) -> str:
        with app.test_request_context(f"/?lang={lang}"):
            return render_template(f"dashboard/{page}", **ctx)
    return go


COURSE = SimpleNamespace(code="DIST101", title="t")


def _annotation_groups():
    item = SimpleNamespace(submission_id=7, check_id="field.zero_optimization.stage", path="zero_optimization.stage",
                           value=3, annotation="<b>x</b>", reading={"zh": "读", "en": "read"}, confidence=0.6,
                           username="alice", provisional=0.5, review_points=1.0)
    return [SimpleNamespace(key="k1", first=item, items=[item, SimpleNamespace(**{**vars(item), "submission_id": 8})])]


def _question_groups():
    ans = SimpleNamespace(id=11, raw_answer="<i>y</i>", auto_score=0.5, score=0.5, max_score=2.0,
                          details_json={"confidence": 0.4}, feedback_json=[], review_state="pending",
                          username="bob", review_comment="")
    return [SimpleNamespace(key="k2", first=ans, answers=[ans, SimpleNamespace(**{**vars(ans), "id": 12})],
                            requested=False)]


class _Question:
    points = 2.0

    def text(self, key: str, lang: str) -> str:
        return key


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_both_pages_render_the_same_buttons_keys_and_their_own_fields(render, lang: str) -> None:
    ann = _form(render("review_annotation.html", lang, course=COURSE, groups=_annotation_groups()))
    que = _form(render("review_question.html", lang, course=COURSE, groups=_question_groups(), q=_Question(),
                       qid="ch7_3/selftest_4", lang_key="en"))
    for form in (ann, que):
        # both groups share one suggestion, so C (freetext's one-key confirm) comes from the macro too
        assert _buttons(form) == [("full", "f"), ("zero", "z"), ("partial", ""), ("suggested", "c")], form
        assert 'name="csrf_token"' in form and 'class="rpoints"' in form and "(P)" in form
    assert 'name="group" value="k1"' in ann and 'name="group" value="k2"' in que
    assert re.findall(r'name="item" value="([^"]+)"', ann) == ["7:field.zero_optimization.stage",
                                                               "8:field.zero_optimization.stage"]
    assert re.findall(r'name="answer_id" value="([^"]+)"', que) == ["11", "12"]
    assert re.search(r'name="percent" min="0" max="100" step="1"', ann)
    assert re.search(r'name="points" min="0" max="2" step="0.01"', que)
    assert 'action="/dashboard/DIST101/review/annotations/decide"' in ann
    assert 'action="/dashboard/DIST101/review/ch7_3/selftest_4/decide"' in que
    if lang == "zh_CN":
        assert "满分" in ann and "满分" in que


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_enter_in_either_points_field_submits_save_points(render, lang: str) -> None:
    """Enter in a field submits the form's first submit button (HTML implicit submission): it was
    "full marks", so 0.5 / 50 + Enter saved full marks (browser test: tests/server/quiz/test_browser.py)."""
    ann = _form(render("review_annotation.html", lang, course=COURSE, groups=_annotation_groups()))
    que = _form(render("review_question.html", lang, course=COURSE, groups=_question_groups(), q=_Question(),
                       qid="ch7_3/selftest_4", lang_key="en"))
    for form in (ann, que):
        first = re.search(r"<button[^>]*>", form).group(0)
        assert 'value="partial"' in first and "hidden" in first, first
