"""A blind set of homework 2 configs and quiz answers through the readers, measured once.

``python -m bench.blind_set [bench/data/blind37] [--rule symmetric|asymmetric]``. The set (its
README says how it was written and labelled) holds annotated configs with a fair teacher's
verdict per field (``configs/*.labels.json``: full / partial / zero / missing) and free-text quiz
answers with their fair points (``quiz/answers.json``). Nothing here is tuned on the set: it is
read by the service's own functions (``graders.config_annotation.core`` as shipped, with no
field's reading trusted; ``coursework.quiz.grading``; the review pages' group keys), so the
same script, run on an older checkout (``PYTHONPATH=<old tree>``), measures the readers before.

Per part: the reader's **fair share** (its suggestion of the same kind as the teacher's verdict:
full, partial, zero, or no note), readings it routes to a teacher as unsure, suggestions **below**
the fair verdict (a right note read as wrong: a *false fail*) and **above** it (*wrong points*);
then what counts at once without a teacher under the rule (``symmetric``: nothing a reader has
not earned trust for, and no trust is earned on a fresh set; ``asymmetric``, the rule before: a
note read as worth nothing counted its 0 at once) and how often that count is below or above the
fair verdict; and the teacher's **decisions per student**: the held answers grouped the way the
review pages group them, one decision per distinct fair verdict in a group (the teacher unticks
the others). Quiz answers are measured as practice shows them (the reading at once, never
counted) and as the graded quiz holds them (its four free-text questions).
"""
from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SET = Path(__file__).resolve().parent / "data" / "blind37"
FAIR = {"full": 1.0, "partial": 0.5, "zero": 0.0, "missing": 0.0}
TOL = 0.01


@dataclass
class Read:
    """One labelled note or answer and what the reader made of it."""

    part: str  # "notes" | "quiz"
    item: str  # dialect:path or question id
    fair: float
    fair_kind: str  # full | partial | zero | missing
    suggested: float  # the reader's share (held or not)
    reader_kind: str
    unsure: bool
    counted: float | None  # what counts at once without a teacher under the rule (None: held)
    key: str  # review group key
    student: str


def kind(share: float, empty: bool = False) -> str:
    if empty:
        return "missing"
    return "full" if share >= 1 - TOL else "zero" if share <= TOL else "partial"


def _check_for(by_id: dict, path: str):
    """The field check a label's key path lands on (``bf16.enabled`` is judged as ``bf16``)."""
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        c = by_id.get("field." + ".".join(parts[:n]))
        if c is not None:
            return c
    return None


def read_notes(folder: Path, rule: str) -> tuple[list[Read], list[str]]:
    from graders.config_annotation import core
    from server.dashboard.review_annotation import Pending, group_key

    os.environ.pop(core.TRUSTED_ENV, None)  # as shipped: no field's reading has earned trust
    cfg = core.load_config()
    out, unmatched = [], []
    for lab_path in sorted((folder / "configs").glob("*.labels.json")):
        lab = json.loads(lab_path.read_text(encoding="utf-8"))
        src = (folder / "configs" / lab["config"]).read_text(encoding="utf-8")
        try:
            by_id = {c.id: c for c in core.grade_config_text(src, lab["config"], cfg)}
        except Exception as e:  # noqa: BLE001  an unreadable config: every label unmatched, said so
            unmatched += [f"{lab['config']}:{p} ({type(e).__name__})" for p in lab["fields"]]
            continue
        for path, label in lab["fields"].items():
            if label.get("covered") is False:
                continue
            c = _check_for(by_id, path)
            if c is None:
                unmatched.append(f"{lab['config']}:{path}")
                continue
            ev = c.evidence
            empty = ev.get("verdict") == "missing"
            held = ev.get("review") == "pending"
            if held:
                suggested = float(ev.get("provisional_points") or 0) / (float(ev.get("review_points") or 1) or 1)
            else:
                suggested = c.points / c.max_points if c.max_points else 0.0
            unsure = bool(ev.get("needs_review"))
            counted = None if held else suggested
            if rule == "symmetric" and not held and not empty:
                counted = None  # an older checkout counted its zeros: the symmetric rule holds them
            if rule == "asymmetric" and not held:
                counted = suggested
            p = Pending(0, 0, "", c.id, ev.get("dialect", ""), c.id[len("field."):], ev.get("value"),
                        ev.get("annotation", ""), {}, ev.get("verdict", ""), suggested, 1.0,
                        float(ev.get("confidence", 1.0)), {"missing": ev.get("missing", []), "wrong": ev.get("wrong", [])})
            out.append(Read("notes", f"{ev.get('dialect')}:{c.id}", FAIR[label["verdict"]], label["verdict"],
                            suggested, kind(suggested, empty), unsure, counted, group_key(p), lab["config"]))
    return out, unmatched


def read_quiz(folder: Path) -> list[Read]:
    from coursework.quiz.bank import load_question, load_quiz
    from coursework.quiz.grading import grade
    from server.quiz.review import group_key

    graded = set(load_quiz("ch7_3_graded").question_ids)
    out = []
    for a in json.loads((folder / "quiz" / "answers.json").read_text(encoding="utf-8")):
        qid = f"ch7_3/{a['question']}"
        r = grade(load_question(qid), 1, a["answer"])
        fair = float(a["points"]) / float(a["max_points"])
        share = r.provisional_fraction
        part = "quiz" if qid in graded else "quiz-practice-only"
        out.append(Read(part, qid, fair, kind(fair), share, kind(share), r.needs_review, None,
                        qid + group_key(qid, a["answer"], r.details), a["id"]))
    return out


def decisions(reads: list[Read]) -> int:
    """One decision per distinct fair verdict in each group of held answers (groups are small
    here: each is read whole)."""
    groups: dict[str, set[float]] = defaultdict(set)
    for r in reads:
        if r.counted is None:
            groups[r.key].add(round(r.fair, 2))
    return sum(len(v) for v in groups.values())


def summary(reads: list[Read], students: int) -> dict:
    n = len(reads)
    agree = sum(r.reader_kind == r.fair_kind for r in reads)
    counted = [r for r in reads if r.counted is not None]
    return {
        "n": n, "fair_share": round(agree / n, 3) if n else None,
        "unsure": sum(r.unsure for r in reads),
        "suggested_below": sum(r.suggested < r.fair - TOL for r in reads),
        "suggested_above": sum(r.suggested > r.fair + TOL for r in reads),
        "full_on_zero": sum(r.suggested >= 1 - TOL and r.fair <= TOL for r in reads),
        "counted_at_once": len(counted),
        "false_fails_counted": sum(r.counted < r.fair - TOL for r in counted),
        "wrong_points_counted": sum(r.counted > r.fair + TOL for r in counted),
        "decisions": decisions(reads), "students": students,
        "decisions_per_student": round(decisions(reads) / students, 2) if students else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(DEFAULT_SET))
    ap.add_argument("--rule", choices=("symmetric", "asymmetric"), default="symmetric")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    notes, unmatched = read_notes(folder, args.rule)
    quiz = read_quiz(folder)
    graded = [r for r in quiz if r.part == "quiz"]
    per_q = defaultdict(int)
    for r in graded:
        per_q[r.item] += 1
    result = {
        "rule": args.rule,
        "notes": summary(notes, len({r.student for r in notes})),
        "notes_unmatched": unmatched,
        "quiz_practice_all_six": summary(quiz, max(per_q.values(), default=0)),
        "quiz_graded": summary(graded, max(per_q.values(), default=0)),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"blind set {folder} (rule {args.rule}; no reading trusted)")
    for part in ("notes", "quiz_practice_all_six", "quiz_graded"):
        print(part, json.dumps(result[part]))
    print("labels the reader does not grade:", len(unmatched), unmatched[:10])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
