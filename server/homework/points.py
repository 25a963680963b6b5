"""What an item is out of, from its definition (never from whoever happened to submit).

A homework's maximum is ``total_points`` in its ``assignment.json`` when given, else the sum
of the points of its checks (plus ``fields.points`` for the annotation homework); a quiz's
is the sum of its questions' points. The gradebook, the exports, the student's pages and
the statistics all read these, so "85 / 100" means the same thing on every page before the
first submission exists.
"""
from __future__ import annotations

import re

from coursework.assignments import Assignment, load
from coursework.exceptions import AssignmentNotFound
from coursework.quiz.bank import BankError, Quiz, load_question, load_quiz


def assignment_total(assignment: Assignment) -> float | None:
    """Points a homework is out of, or None when its ``assignment.json`` declares none."""
    raw = assignment.raw or {}
    declared = raw.get("total_points")
    if isinstance(declared, (int, float)) and not isinstance(declared, bool) and declared > 0:
        return float(declared)
    total = 0.0
    for spec in (raw.get("checks") or {}).values():
        pts = spec.get("points") if isinstance(spec, dict) else None
        if isinstance(pts, (int, float)) and not isinstance(pts, bool) and pts > 0:
            total += pts
    fields = raw.get("fields")
    if isinstance(fields, dict) and isinstance(fields.get("points"), (int, float)) and fields["points"] > 0:
        total += fields["points"]
    return round(total, 4) if total > 0 else None


def quiz_total(quiz: Quiz) -> float:
    """Points a quiz is out of: the sum of its questions' points (a question missing counts 0)."""
    total = 0.0
    for qid in quiz.question_ids:
        try:
            total += load_question(qid).points
        except BankError:
            continue
    return round(total, 4)


def item_total(kind: str, ref: str) -> float | None:
    """The maximum of ``hw``/``quiz`` ``ref`` from its definition (None: unknown, e.g. folder removed)."""
    try:
        if kind == "hw":
            return assignment_total(load(ref))
        return quiz_total(load_quiz(ref)) or None
    except (AssignmentNotFound, BankError, ValueError, OSError):
        return None


def natural_key(text: str) -> tuple:
    """Sort key that puts "Homework 2" before "Homework 10"."""
    return tuple(int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text or ""))
