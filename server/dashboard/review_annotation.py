"""Homework 2's annotations a teacher confirms: fields whose reading was unsure (``review:
pending`` in the stored report, 0 points so far), grouped like the quiz's free-text answers so
that one decision grades every similar annotation of the same field and value.

A group is one field with one value, read the same way (verdict, what is missing or wrong), so
one decision settles every note the reading put together; a note read as about nothing or about
another concept is grouped by the catalogue's facets found with their polarity, and one in which
the catalogue found nothing by its normalised text only.

Fields a student asked about (``AnnotationReviewRequest``, see ``server.homework.asking``) are
listed too, with the student's comment and their automatic points, in groups of their own (the
key says "asked"); a decision on them replaces the automatic points and closes the request.

A decision stores each annotation's points as a hand-given score of its submission
(``ManualCellScore`` with the check id ``field.<path>``, audited): the gradebook adds them to
the submission's score and the student's report shows them (``merge_manual_scores``). It is
also kept as a graded example (``QuizReviewDecision``, question id ``annotation:...``) for
``annotation_examples.json`` (``decisions_as_examples``).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update

from coursework.config_annotation import annotate, catalogue
from coursework.quiz import textmatch
from server.scores.actions import _audit
from coursework.report import askable_field, field_stake
from server.scores.models import AnnotationReviewRequest, ManualCellScore
from server.extensions import db
from server.scores import events
from server.models import Submission, SubmissionStatus, User, utcnow
from server.quiz.models import QuizReviewDecision
from server.quiz import labels

EXAMPLE_PREFIX = "annotation:"


@dataclass
class Pending:
    """One annotation waiting for a teacher."""

    submission_id: int
    user_id: int
    username: str
    check_id: str  # field.<path>
    dialect: str
    path: str
    value: Any
    annotation: str
    reading: dict[str, str]  # what the student was told the reading found
    verdict: str
    provisional: float
    review_points: float
    confidence: float
    facts: dict[str, Any] = field(default_factory=dict)  # missing / wrong, for the example
    asked: bool = False  # a student asked about an auto-graded field (its points so far: provisional)
    comment: str = ""  # the student's reason, when asked
    reason: str = "unsure"  # why it waits: "unsure", or "confirm" (the course confirms these full marks)

    @property
    def field_key(self) -> str:
        """The field and value this annotation is about (what a decision is an example of)."""
        return f"{self.dialect}:{self.path}={json.dumps(self.value, sort_keys=True)}"


@dataclass
class Group:
    key: str
    items: list[Pending] = field(default_factory=list)

    @property
    def first(self) -> Pending:
        return self.items[0]


def _fingerprint(text: str) -> list[str]:
    """The catalogue's facets in the annotation, each with its polarity."""
    cat = catalogue.load()
    out = set()
    for s in annotate.analyse(text, cat):
        for c in s.clauses:
            out |= {f"{f}+" for f in c.positive} | {f"{f}-" for f in c.negated | c.reduced}
    return sorted(out)


READ_ALIKE = ("correct", "partial", "contradiction")  # verdicts whose reading names what was met / missing / wrong


def group_key(p: Pending) -> str:
    """Annotations share a key when they are about the same field and value and the reading is the
    same (verdict, what is missing, what is wrong): one decision settles them all, whatever words
    they used. A note read as about nothing or another concept is grouped by its facets with their
    polarity, one with no facet by its text. A field a student asked about is never grouped with
    unsure ones (its decision replaces given points)."""
    kind = "asked|" if p.asked else ("confirm|" if p.reason == "confirm" else "")
    reading = [p.field_key, p.verdict, ",".join(p.facts.get("missing", [])), ",".join(p.facts.get("wrong", []))]
    words = [] if p.verdict in READ_ALIKE else _fingerprint(p.annotation)
    if p.verdict in READ_ALIKE:
        basis = kind + "read|" + "|".join(reading)
    elif words:
        basis = kind + "|".join(reading + [",".join(words)])
    else:
        basis = kind + p.field_key + "|text|" + re.sub(r"[\s\W_]+", "", textmatch.normalise(p.annotation), flags=re.UNICODE)
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def pending(course_id: int) -> list[Pending]:
    """Every annotation of the course's graded submissions still waiting for a teacher: unsure
    ones (``review: pending``) and auto-graded ones a student asked about (open requests)."""
    decided = {(r.submission_id, r.cell_id) for r in db.session.execute(
        select(ManualCellScore.submission_id, ManualCellScore.cell_id)
        .join(Submission, Submission.id == ManualCellScore.submission_id)
        .where(Submission.course_id == course_id, ManualCellScore.cell_id.like("field.%")))}
    rows = db.session.execute(
        select(Submission.id, Submission.user_id, Submission.report_json, User.username)
        .join(User, User.id == Submission.user_id)
        .where(Submission.course_id == course_id, Submission.status == SubmissionStatus.GRADED.value)
        .order_by(Submission.id))
    asked = {(r.submission_id, r.check_id): r for r in db.session.scalars(
        select(AnnotationReviewRequest).join(Submission, Submission.id == AnnotationReviewRequest.submission_id)
        .where(Submission.course_id == course_id, AnnotationReviewRequest.closed_at.is_(None)))}
    out = []
    for sid, uid, report, username in rows:
        for c in (report or {}).get("checks", []):
            ev = c.get("evidence") or {}
            if not str(c.get("id", "")).startswith("field.") or (sid, c["id"]) in decided:
                continue
            req = asked.get((sid, c["id"]))
            if req is not None and askable_field(c):
                out.append(_item(sid, uid, username, c, ev, *field_stake(c), asked=True, comment=req.comment))
            elif ev.get("review") == "pending":
                out.append(_item(sid, uid, username, c, ev, float(ev.get("provisional_points", 0.0)),
                                 float(ev.get("review_points", 0.0))))
    return out


def _item(sid: int, uid: int, username: str, c: dict, ev: dict, provisional: float, top: float,
          asked: bool = False, comment: str = "") -> Pending:
    reading = (c.get("message") or {}) if asked else (ev.get("reading") or {})
    return Pending(sid, uid, username, c["id"], str(ev.get("dialect", "")), c["id"][len("field."):],
                   ev.get("value"), str(ev.get("annotation", "")), reading, str(ev.get("verdict", "")),
                   provisional, top, float(ev.get("confidence", 0.0)),
                   {"missing": ev.get("missing") or [], "wrong": ev.get("wrong") or []}, asked, comment,
                   "asked" if asked else str(ev.get("review_reason") or "unsure"))


def groups(course_id: int) -> list[Group]:
    """The open groups, largest first."""
    by_key: dict[str, Group] = {}
    for p in pending(course_id):
        key = group_key(p)
        by_key.setdefault(key, Group(key)).items.append(p)
    return sorted(by_key.values(), key=lambda g: (-len(g.items), g.first.submission_id))


class DecisionError(ValueError):
    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def decide(course_id: int, items: list[tuple[int, str]], fraction: float, teacher_id: int, group: str = "") -> int:
    """Give every named open annotation ``fraction`` of its points; returns how many were graded.

    Only the annotations named (those the teacher saw) and still open are graded."""
    if not 0.0 <= fraction <= 1.0:
        raise DecisionError("bad_fraction")
    wanted = set(items)
    rows = [p for p in pending(course_id) if (p.submission_id, p.check_id) in wanted]
    if not rows:
        raise DecisionError("nothing_open")
    now = utcnow()
    for p in rows:
        score = round(fraction * p.review_points, 2)
        db.session.add(ManualCellScore(submission_id=p.submission_id, cell_id=p.check_id, score=score,
                                       max_points=p.review_points, comment="", graded_by=teacher_id, graded_at=now))
        _audit(course_id, p.user_id, f"sub:{p.submission_id}/{p.check_id}", p.provisional if p.asked else None,
               score, "annotation review (asked by the student)" if p.asked else "annotation review", teacher_id)
        if p.asked:
            db.session.execute(update(AnnotationReviewRequest).where(
                AnnotationReviewRequest.submission_id == p.submission_id,
                AnnotationReviewRequest.check_id == p.check_id).values(closed_at=now, auto_points=p.provisional))
            # the points the current report counts (a regrade since the request may have changed them)

        labels.record(labels.annotation_item(p.dialect, p.path), p.annotation, fraction,
                      {"rule": round(p.provisional / p.review_points, 4) if p.review_points else None},
                      "asked" if p.asked else "group", course_id, teacher_id,
                      detail=json.dumps(p.value, sort_keys=True))
    first = rows[0]
    db.session.add(QuizReviewDecision(
        course_id=course_id, question_id=(EXAMPLE_PREFIX + first.field_key)[:160], group_key=group[:64] or "-",
        answer_text=first.annotation[:4000], fraction=fraction,
        rubric_reading={"dialect": first.dialect, "field": first.path, "value": first.value,
                        "verdict": first.verdict, "confidence": first.confidence, **first.facts},
        answers=len(rows), decided_by=teacher_id, decided_at=now))
    db.session.commit()
    events.changed_submissions({r.submission_id for r in rows})
    return len(rows)


def decisions_as_examples(course_id: int | None = None) -> list[dict[str, Any]]:
    """Stored decisions as ``annotation_examples.json`` entries (split "tune"), newest first."""
    q = select(QuizReviewDecision).where(QuizReviewDecision.question_id.startswith(EXAMPLE_PREFIX))
    if course_id is not None:
        q = q.where(QuizReviewDecision.course_id == course_id)
    out = []
    for d in db.session.scalars(q.order_by(QuizReviewDecision.id.desc())):
        r = d.rubric_reading or {}
        expect = "correct" if d.fraction >= 1 - 1e-9 else ("wrong" if d.fraction <= 1e-9 else "partial")
        out.append({"dialect": r.get("dialect"), "field": r.get("field"), "value": r.get("value"),
                    "answer": d.answer_text, "expect": expect, "split": "tune", "note": f"teacher decision {d.id}"})
    return out
