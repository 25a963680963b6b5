"""Single choice, multiple choice and ordering answers: option ids in, score and feedback out."""
from __future__ import annotations

from typing import Any

from coursework.quiz.result import FormatError, Text

MAX_CHOICE_CHARS = 400


def parse_ids(raw: str, known: list[str], allow_many: bool) -> list[str]:
    """Option ids from "a", "a,c" or "c, a, b"; FormatError for empty/unknown/duplicate ids."""
    text = (raw or "").strip()
    if not text:
        raise FormatError({"zh": "请先选择。", "en": "Please make a choice first."}, "empty")
    if len(text) > MAX_CHOICE_CHARS:
        raise FormatError({"zh": "答案格式不对。", "en": "Malformed answer."}, "too_long")
    ids = [p.strip() for p in text.replace("，", ",").split(",") if p.strip()]
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise FormatError({"zh": f"未知选项：{', '.join(unknown)[:60]}", "en": f"Unknown option: {', '.join(unknown)[:60]}"},
                          "unknown_option")
    if len(set(ids)) != len(ids):
        raise FormatError({"zh": "选项重复。", "en": "An option is repeated."}, "duplicate")
    if not allow_many and len(ids) != 1:
        raise FormatError({"zh": "本题只能选一个。", "en": "Choose exactly one option."}, "one_only")
    return ids


def grade_choice(raw: str, options: list[dict[str, Any]], correct: set[str], multiple: bool
                 ) -> tuple[float, list[Text], dict[str, Any]]:
    """Fraction earned; multiple choice scores (right picks - wrong picks) / right options, floored at 0."""
    ids = parse_ids(raw, [o["id"] for o in options], multiple)
    by_id = {o["id"]: o for o in options}
    feedback = [by_id[i]["feedback"] for i in ids if by_id[i].get("feedback")]
    if multiple:
        hits = len(correct & set(ids))
        false_picks = len(set(ids) - correct)
        fraction = max(0.0, (hits - false_picks) / len(correct))
        for i in sorted(correct - set(ids)):
            text = by_id[i]["text"]
            feedback.append({"zh": f"漏选：{text['zh']}", "en": f"Missed: {text['en']}"})
    else:
        fraction = 1.0 if ids[0] in correct else 0.0
    return fraction, feedback, {"chosen": ids}


def grade_ordering(raw: str, entries: list[dict[str, Any]]) -> tuple[float, list[Text], dict[str, Any]]:
    """Kendall-style credit: 1 for the right order, 0 for reversed or random-looking orders."""
    items = [e["id"] for e in entries]
    ids = parse_ids(raw, items, allow_many=True)
    if sorted(ids) != sorted(items):
        raise FormatError({"zh": "请给出所有步骤的完整顺序。", "en": "Put every step in order (all of them)."},
                          "incomplete")
    rank = {item: pos for pos, item in enumerate(items)}
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
    concordant = sum(1 for a, b in pairs if rank[a] < rank[b])
    fraction = max(0.0, 2 * concordant / len(pairs) - 1) if pairs else 1.0
    first_wrong = next((pos for pos, item in enumerate(ids) if items[pos] != item), None)
    details = {"chosen": ids, "first_wrong_position": first_wrong}
    feedback: list[Text] = []
    if first_wrong is not None:
        text = entries[first_wrong]["text"]
        feedback.append({"zh": f"第 {first_wrong + 1} 步应是：{text['zh']}",
                         "en": f"Step {first_wrong + 1} should be: {text['en']}"})
    return round(fraction, 4), feedback, details
