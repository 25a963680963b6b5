"""How often the automatic reading agrees with a fair teacher, on the graded answer sets.

The answer sets are data: each self-test question's ``examples.json`` and homework 2's
``annotation_examples.json``. Every example carries the teacher's verdict and a ``split``:
``tune`` examples may be looked at while improving the rubric and choosing the confidence
threshold; ``held`` examples are only measured. An example written without a ``split`` gets
one from a stable hash of its field and answer (``split_of``): half of them, chosen by
SHA-256 and not by a person, are held out before anyone sees how they are graded. ``python -m coursework.quiz.agreement [-v] [--held]``
prints the table (agreement, wrong answers given full marks, share sent to the teacher).
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable

from coursework.quiz.bank import all_question_ids, load_question
from coursework.quiz.grading import grade
from coursework.quiz.result import AnswerStatus


@dataclass
class Outcome:
    """One example: what the teacher says, what the machine did."""

    source: str
    answer: str
    expect: str  # full | partial | zero (quiz); correct | partial | wrong (annotations)
    expect_score: float | None
    got: str
    got_score: float
    review: bool  # sent to the teacher instead of graded at once
    field: str = ""  # homework 2: the annotated field

    @property
    def lang(self) -> str:
        return language_of(self.answer)

    @property
    def fair(self) -> bool:
        if self.got != self.expect:
            return False
        return self.expect_score is None or math.isclose(self.got_score, self.expect_score, abs_tol=0.01)

    @property
    def wrong_full(self) -> bool:
        """A wrong or incomplete answer that got full marks."""
        return self.got in ("full", "correct") and self.expect not in ("full", "correct")


def split_of(example: dict[str, Any]) -> str:
    """The example's own ``split``, else ``held`` or ``tune`` by the first byte of the SHA-256 of
    ``field|answer`` (odd: held): stable across runs, machines and reorderings of the file."""
    if example.get("split"):
        return example["split"]
    key = f"{example.get('field', '')}|{example['answer']}".encode("utf-8")
    return "held" if hashlib.sha256(key).digest()[0] % 2 else "tune"


def language_of(answer: str) -> str:
    """``zh`` when the answer has a CJK character, else ``en``."""
    return "zh" if re.search(r"[\u4e00-\u9fff]", answer) else "en"


def _category(fraction: float) -> str:
    return "full" if fraction >= 1 - 1e-9 else ("zero" if fraction <= 1e-9 else "partial")


def quiz_outcomes(split: str | None = None, qids: Iterable[str] | None = None) -> list[Outcome]:
    """Every text question's examples (of ``split``, or all) graded now."""
    out = []
    for qid in qids or all_question_ids():
        q = load_question(qid)
        if q.type != "text":
            continue
        for e in q.examples:
            if split and e.get("split", "tune") != split or e["expect"] == "format_error":
                continue
            r = grade(q, e.get("seed", 1), e["answer"])
            if r.status == AnswerStatus.FORMAT_ERROR:
                out.append(Outcome(qid, e["answer"], e["expect"], e.get("score"), "format_error", 0.0, False))
                continue
            out.append(Outcome(qid, e["answer"], e["expect"], e.get("score"), _category(r.provisional_fraction),
                               round(r.provisional_fraction, 4), r.needs_review))
    return out


def annotation_outcomes(split: str | None = None) -> list[Outcome]:
    """Homework 2's annotation examples judged now (correct / partial / wrong)."""
    from coursework.config_annotation import annotate, catalogue

    cat = catalogue.load()
    path = catalogue.DEFAULT_PATH.parent / "annotation_examples.json"
    out = []
    for e in json.loads(path.read_text("utf-8")):
        if split and split_of(e) != split:
            continue
        value = cat.field_value(e["dialect"], e["field"], e["value"])
        rule = cat.rule(e["dialect"], e["field"], value)
        j = annotate.judge(e["answer"], rule, cat)
        got = {"correct": "correct", "partial": "partial"}.get(j.verdict.value, "wrong")
        out.append(Outcome(f"{e['dialect']}:{e['field']}={e['value']}", e["answer"], e["expect"], None, got,
                           j.fraction, j.needs_review, field=e["field"]))
    return out


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Agreement over everything, agreement among auto-graded answers, wrong-full count, review share."""
    auto = [o for o in outcomes if not o.review]
    n = len(outcomes) or 1
    return {"n": len(outcomes), "fair_all": round(sum(o.fair for o in outcomes) / n, 4),
            "auto": len(auto), "fair_auto": round(sum(o.fair for o in auto) / (len(auto) or 1), 4),
            "wrong_full_auto": sum(o.wrong_full for o in auto), "wrong_full_all": sum(o.wrong_full for o in outcomes),
            "review_share": round((len(outcomes) - len(auto)) / n, 4)}


def breakdown(outcomes: list[Outcome], key: str) -> dict[str, dict[str, Any]]:
    """``summary`` per ``field`` or per ``lang`` (or any Outcome attribute)."""
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(str(getattr(o, key)), []).append(o)
    return {k: summary(v) for k, v in sorted(groups.items())}


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    for name, fn in (("quiz", quiz_outcomes), ("annotations", annotation_outcomes)):
        for split in (("tune", "held") if "--held" in argv else ("tune",)):
            outs = fn(split)
            print(name, split, json.dumps(summary(outs)))
            if verbose and split == "tune":
                for o in outs:
                    if not o.fair:
                        print(f"   {'R' if o.review else '-'} {o.source} {o.expect}{o.expect_score or ''} -> "
                              f"{o.got}{o.got_score}: {o.answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
