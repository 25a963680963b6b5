"""Variants and grading: the same (question, seed) always gives the same numbers and answer."""
from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

from coursework.quiz import choice, numeric, rubric
from coursework.quiz.bank import Question
from coursework.quiz.result import AnswerStatus, FormatError, QuestionResult, Text, format_error
from coursework.text import pick


class _Params(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(template: str, params: dict[str, Any]) -> str:
    """Fill ``{name}`` placeholders from the generator's params; unknown names stay as typed."""
    if not params or "{" not in template:
        return template
    return string.Formatter().vformat(template, (), _Params(params))


@dataclass
class Variant:
    """One concrete instance of a question for one seed."""

    question: Question
    seed: int
    params: dict[str, Any] = field(default_factory=dict)
    answer: Any = None  # option id(s), a number in base units, or None for rubric questions
    accept: list[str] = field(default_factory=list)  # alternative right answers (tests, docs)
    reject: list[str] = field(default_factory=list)  # known wrong answers (tests)
    option_order: list[str] = field(default_factory=list)

    def reference(self, lang: str = "en") -> str:
        """The canonical answer string that must score full marks."""
        q = self.question
        if q.type in ("single", "multiple"):
            return ",".join(sorted(self.correct_ids()))
        if q.type == "ordering":
            return ",".join(i["id"] for i in q.info["items"])
        if q.type == "numeric":
            spec = q.info["numeric"]
            unit = spec.get("display_unit", spec.get("default_unit", ""))
            factor = numeric.UNITS[spec["dimension"]].get(unit.lower(), (1, "-"))[0] if unit else 1
            return f"{self.answer / factor:.6g} {unit}".strip()
        return render(q.text("reference", lang), self.params)

    def reference_text(self, lang: str = "en") -> str:
        """The reference answer as the page shows it: option *text* (never ids), an ordering as its
        steps, a number as a person writes it ("about 2.2 ms")."""
        q = self.question
        by_id = {o["id"]: o for o in q.info.get("options", []) + q.info.get("items", [])}

        def text(i: str) -> str:
            t = by_id[i]["text"]
            return render(pick(t, lang), self.params)

        if q.type in ("single", "multiple"):
            order = [i for i in self.option_order if i in self.correct_ids()] or sorted(self.correct_ids())
            return ("；" if lang == "zh" else "; ").join(text(i) for i in order)
        if q.type == "ordering":
            return " → ".join(f"{n}. {text(i['id'])}" for n, i in enumerate(q.info["items"], 1))
        if q.type == "numeric":
            spec = q.info["numeric"]
            unit = spec.get("display_unit", spec.get("default_unit", ""))
            exact = spec["dimension"] == "count" or float(spec.get("rtol", 0.02)) == 0
            zh, en = numeric.display(float(self.answer), spec["dimension"], unit, exact)
            return zh if lang == "zh" else en
        return self.reference(lang)

    def correct_ids(self) -> set[str]:
        if self.answer is not None:
            return set(self.answer) if isinstance(self.answer, (list, tuple, set)) else {self.answer}
        return set(self.question.info.get("correct", []))

    def public(self, lang: str) -> dict[str, Any]:
        """What the page shows: prompt and shuffled options, never the answer."""
        q = self.question
        by_id = {o["id"]: o for o in q.info.get("options", []) + q.info.get("items", [])}
        shown = [{"id": i, "text": render(pick(by_id[i]["text"], lang), self.params)}
                 for i in self.option_order]
        unit = q.info.get("numeric", {}).get("default_unit", "")
        return {"id": q.id, "type": q.type, "seed": self.seed, "points": q.points, "title": q.text("title", lang),
                "prompt": render(q.text("prompt", lang), self.params), "options": shown, "unit": unit,
                "section": q.section}


def make_variant(q: Question, seed: int) -> Variant:
    """Run the question's generator (if any) and shuffle its options, all from ``seed``."""
    rng = random.Random(seed)
    out: dict[str, Any] = q.generator.generate(rng) if q.generator else {}
    v = Variant(question=q, seed=seed, params=out.get("params", {}), answer=out.get("answer"),
                accept=list(out.get("accept", [])), reject=list(out.get("reject", [])))
    if v.answer is None and q.type == "numeric":
        v.answer = float(q.info["numeric"]["answer"])
    ids = [o["id"] for o in q.info.get("options", q.info.get("items", []))]
    if q.type in ("single", "multiple", "ordering") and q.info.get("shuffle", True):
        rng.shuffle(ids)
        if q.type == "ordering" and len(ids) > 1 and ids == [i["id"] for i in q.info["items"]]:
            ids = ids[1:] + ids[:1]  # never show an ordering question already solved
    v.option_order = ids
    return v


def grade(q: Question, seed: int, raw: str) -> QuestionResult:
    """Grade ``raw`` against the variant for ``seed``; unreadable input is a FORMAT_ERROR result."""
    return grade_variant(make_variant(q, seed), raw)


def grade_variant(v: Variant, raw: str) -> QuestionResult:
    """``grade`` on a variant already built (the web app keeps them per process): the same result
    as ``grade(v.question, v.seed, raw)``, without running the generator again. ``v`` is only read."""
    q = v.question
    try:
        fraction, feedback, details = _grade_by_type(v, raw)
    except FormatError as err:
        return format_error(q.id, q.points, err)
    fraction = min(1.0, max(0.0, fraction))
    verdict = q.info.get("feedback", {})
    lead: list[Text] = []
    key = "correct" if fraction >= 1 - 1e-9 else "incorrect"
    if verdict.get(key):
        lead.append(_render_text(verdict[key], v.params) or {})
    details["fraction"] = round(fraction, 4)
    if details.get("needs_review"):
        # The rubric is unsure: nothing is scored until a teacher confirms. The student sees
        # what the rubric found, worded as a reading, not a verdict.
        details["provisional_fraction"] = round(fraction, 4)
        return QuestionResult(question_id=q.id, status=AnswerStatus.NEEDS_REVIEW, score=0.0, max_score=q.points,
                              feedback=[REVIEW_NOTE] + feedback, details=details)
    return QuestionResult(question_id=q.id, status=AnswerStatus.GRADED, score=round(fraction * q.points, 4),
                          max_score=q.points, feedback=lead + feedback, details=details)


REVIEW_NOTE: Text = {
    "zh": "这份答案需要老师确认：自动评分没有把握读对它。下面是自动评分读到的内容，老师确认后才计分。",
    "en": "A teacher will confirm this answer: the automatic reading is not sure it understood it. "
          "Below is what it found; the answer counts once a teacher has confirmed it."}


def _grade_by_type(v: Variant, raw: str) -> tuple[float, list[Text], dict[str, Any]]:
    q = v.question
    if q.type in ("single", "multiple"):
        options = [dict(o, feedback=_render_text(o.get("feedback"), v.params)) for o in q.info["options"]]
        return choice.grade_choice(raw, options, v.correct_ids(), q.type == "multiple")
    if q.type == "ordering":
        return choice.grade_ordering(raw, q.info["items"])
    if q.type == "numeric":
        return _grade_numeric(v, raw)
    return rubric.grade_text(raw, rubric.compile_rubric(q.info["rubric"]))


def _render_text(text: Text | None, params: dict[str, Any]) -> Text | None:
    return {k: render(s, params) for k, s in text.items()} if text else None


def _grade_numeric(v: Variant, raw: str) -> tuple[float, list[Text], dict[str, Any]]:
    spec = v.question.info["numeric"]
    rtol, atol = float(spec.get("rtol", 0.02)), float(spec.get("atol", 0.0))
    qty = numeric.parse_quantity(raw, spec["dimension"], spec.get("default_unit", ""), bool(spec.get("require_unit")))
    details: dict[str, Any] = {"value": qty.base_value, "unit": qty.unit}
    if numeric.within(qty.base_value, v.answer, rtol, atol):
        return 1.0, [], details
    confusion = numeric.unit_confusion(qty, v.answer, rtol, atol)
    if confusion:
        details["unit_confusion"] = True
        return 0.0, [confusion], details
    for mistake in spec.get("mistakes", []):
        # Known slips (12 B/param, forgetting to divide by N ...) get their own message.
        target = v.params.get(mistake["param"])
        if target is not None and numeric.within(qty.base_value, float(target), rtol, atol):
            details["mistake"] = mistake["id"]
            return 0.0, [_render_text(mistake["feedback"], v.params) or {}], details
    return 0.0, [], details
