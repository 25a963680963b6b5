"""Free-text answers a teacher confirms: the rubric's unsure answers ("pending") and the ones a
student asked about ("requested"), grouped so that one decision grades every similar answer.

A group is the set of pending answers to one question that the rubric read the same way: the
same items met, missing and confused, so that one decision settles as many answers as the reading
can truthfully put together. Answers in which the rubric met or confused no item are grouped by
the concept words found with their polarity, and answers in which it found nothing at all by
their normalised text only (so an unfamiliar right paraphrase is never swept in with "I don't
know").

A decision sets the score of every answer it names (the ids shown to the teacher: an answer
that arrived since is not decided unseen), recomputes each attempt's score from its answers
in one SQL statement (so the gradebook follows), and is stored as a graded example.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select, update

from coursework.quiz import rubric as rubric_mod
from coursework.quiz import textmatch
from coursework.quiz.bank import load_question
from server.extensions import db
from server.scores import events
from server.models import utcnow
from server.quiz import labels
from server.quiz.models import QuizAnswer, QuizAttempt, QuizReviewDecision, ReviewState
from server.scores.models import AuditEntry

MAX_COMMENT = 500
OPEN_STATES = (ReviewState.PENDING.value, ReviewState.REQUESTED.value)


def _norm_text(raw: str) -> str:
    return re.sub(r"[\s\W_]+", "", textmatch.normalise(raw or ""), flags=re.UNICODE)


def _fingerprint(question_id: str, raw: str) -> list[str]:
    """The rubric's concept words found in the answer, each with its polarity ("+" / "-")."""
    q = load_question(question_id)
    if q.type != "text":
        return []
    rub = rubric_mod.compile_rubric(q.info["rubric"])
    try:
        text, _ = rubric_mod.prepare(raw, rub)
    except Exception:  # an answer stored before a rubric change: group by text alone
        return []
    found = set()
    for it in rub.items:
        for kind, terms in (("c", it.concept_terms), ("s", it.subject_terms), ("w", it.wrong_terms)):
            for clause in textmatch.split(text):
                for c in clause:
                    for h in rubric_mod._hits(terms, c):
                        found.add(f"{it.id}:{kind}{'-' if h.negated else '+'}")
    return sorted(found)


def group_key(question_id: str, raw: str, details: dict[str, Any]) -> str:
    """Answers share a key when the reading is the same: the same items met, missing and confused
    (one decision then settles every answer read that way; the words used do not split them). An
    answer in which the reading met or confused no item is grouped by its concept words with their
    polarity, and one with none of those by its text alone."""
    reading = [",".join(details.get(k, [])) for k in ("met", "confused", "missing")]
    if details.get("met") or details.get("confused"):
        basis = "read|" + "|".join(reading)
    else:
        words = _fingerprint(question_id, raw)
        basis = "|".join(reading + [",".join(words)]) if words else "text|" + _norm_text(raw)
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


@dataclass
class Group:
    key: str
    answers: list[Any] = field(default_factory=list)  # rows: id, raw_answer, user, details, review_state ...

    @property
    def first(self) -> Any:
        return self.answers[0]

    @property
    def requested(self) -> list[Any]:
        return [a for a in self.answers if a.review_state == ReviewState.REQUESTED.value]


def _open_answers(course_id: int | None, question_id: str | None = None) -> list[Any]:
    from server.models import User

    q = (select(QuizAnswer.id, QuizAnswer.question_id, QuizAnswer.raw_answer, QuizAnswer.details_json,
                QuizAnswer.feedback_json, QuizAnswer.review_state, QuizAnswer.review_comment, QuizAnswer.score,
                QuizAnswer.max_score, QuizAnswer.auto_score, QuizAnswer.lang, QuizAnswer.attempt_id, User.username,
                QuizAnswer.user_id, QuizAnswer.quiz_id)
         .join(QuizAttempt, QuizAttempt.id == QuizAnswer.attempt_id).join(User, User.id == QuizAnswer.user_id)
         .where(QuizAnswer.review_state.in_(OPEN_STATES), QuizAttempt.course_id == course_id)
         .order_by(QuizAnswer.id))
    if question_id is not None:
        q = q.where(QuizAnswer.question_id == question_id)
    return list(db.session.execute(q))


def queue_counts(course_id: int | None) -> dict[str, dict[str, int]]:
    """question id -> {"pending": n, "requested": n, "groups": n} for the course."""
    out: dict[str, dict[str, int]] = {}
    for qid, groups in _grouped(_open_answers(course_id)).items():
        answers = [a for g in groups for a in g.answers]
        out[qid] = {"pending": sum(a.review_state == ReviewState.PENDING.value for a in answers),
                    "requested": sum(a.review_state == ReviewState.REQUESTED.value for a in answers),
                    "groups": len(groups)}
    return out


def _grouped(rows: list[Any]) -> dict[str, list[Group]]:
    by_q: dict[str, dict[str, Group]] = {}
    for r in rows:
        key = group_key(r.question_id, r.raw_answer, r.details_json or {})
        if r.review_state == ReviewState.REQUESTED.value:
            key = "req-" + key  # a student's request is answered on its own, with its comment
        by_q.setdefault(r.question_id, {}).setdefault(key, Group(key)).answers.append(r)
    return {qid: sorted(g.values(), key=lambda g: (-len(g.answers), g.first.id)) for qid, g in by_q.items()}


def groups_for(course_id: int | None, question_id: str) -> list[Group]:
    """The open groups of one question, largest first."""
    return _grouped(_open_answers(course_id, question_id)).get(question_id, [])


class ReviewError(ValueError):
    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def decide(course_id: int | None, question_id: str, answer_ids: list[int], fraction: float, teacher_id: int,
           group: str = "", how: str = "group") -> int:
    """Grade every named open answer of the question at ``fraction``; returns how many were graded."""
    if not 0.0 <= fraction <= 1.0:
        raise ReviewError("bad_fraction")
    rows = [r for r in _open_answers(course_id, question_id) if r.id in set(answer_ids)]
    if not rows:
        raise ReviewError("nothing_open")

    now = utcnow()
    attempts = set()
    for r in rows:
        score = round(fraction * r.max_score, 4)
        changed = db.session.execute(update(QuizAnswer).where(QuizAnswer.id == r.id, QuizAnswer.review_state.in_(OPEN_STATES))
                                     .values(score=score, fraction=fraction, correct=fraction >= 1 - 1e-9,
                                             review_state=ReviewState.REVIEWED.value, reviewed_by=teacher_id,
                                             reviewed_at=now)).rowcount
        if changed and course_id is not None:  # like every hand-given score: who, when, from what to what
            asked = r.review_state == ReviewState.REQUESTED.value
            db.session.add(AuditEntry(course_id=course_id, user_id=r.user_id, actor_id=teacher_id,
                                      target=f"quiz:{r.quiz_id}/attempt:{r.attempt_id}/{question_id}", old=r.score,
                                      new=score, reason="quiz free-text review (asked by the student)" if asked
                                      else "quiz free-text review"))
        attempts.add(r.attempt_id)
        # every answer a teacher read is a labelled example for the readers' earned trust
        # (``labels``); answers settled by a confirmed sample were not read and teach nothing
        if how != "settled":
            labels.record(question_id, r.raw_answer, fraction,
                          labels.readings_of(r.details_json, (r.auto_score or 0.0) / r.max_score if r.max_score else None),
                          "asked" if r.review_state == ReviewState.REQUESTED.value else how, course_id, teacher_id)
    total = (select(func.coalesce(func.sum(QuizAnswer.score), 0.0)).where(QuizAnswer.attempt_id == QuizAttempt.id)
             .scalar_subquery())
    db.session.execute(update(QuizAttempt).where(QuizAttempt.id.in_(attempts)).values(score=total))  # (portable: no SQL round)
    first = rows[0]
    db.session.add(QuizReviewDecision(course_id=course_id, question_id=question_id, group_key=group[:64] or "-",
                                      answer_text=first.raw_answer[:4000], fraction=fraction,
                                      rubric_reading={k: (first.details_json or {}).get(k) for k in
                                                      ("met", "missing", "confused", "confidence", "signs",
                                                       "provisional_fraction")},
                                      answers=len(rows), decided_by=teacher_id, decided_at=now))
    db.session.commit()
    events.changed_attempts(attempts)
    return len(rows)


def request_review(answer: QuizAnswer, comment: str, limit: int) -> None:
    """A student asks a teacher to look at an auto-graded free-text answer of a graded attempt,
    once per answer and at most ``limit`` answers per attempt.

    Practice counts nothing, so its answers never reach the course's queue (unlimited practice
    attempts would flood it); the per-attempt bound keeps one student's graded attempts to a few
    requests. The bound is checked in the same statement that files the request, so two tabs
    cannot both pass it.
    """
    comment = (comment or "").strip()
    if answer.attempt.mode != "graded":
        raise ReviewError("practice")
    if load_question(answer.question_id).type != "text":
        raise ReviewError("not_text")
    if answer.correct and answer.review_state is None:
        raise ReviewError("full_marks")  # nothing a teacher could add
    if answer.review_state is not None:
        raise ReviewError("already_requested")
    if not comment:
        raise ReviewError("empty_comment")
    asked = (select(func.count(QuizAnswer.id)).where(QuizAnswer.attempt_id == answer.attempt_id,
                                                     QuizAnswer.review_comment.is_not(None)).scalar_subquery())
    changed = db.session.execute(update(QuizAnswer).where(QuizAnswer.id == answer.id, QuizAnswer.review_state.is_(None),
                                                          asked < limit)
                                 .values(review_state=ReviewState.REQUESTED.value,
                                         review_comment=comment[:MAX_COMMENT])).rowcount
    db.session.commit()
    if not changed:
        db.session.refresh(answer)
        raise ReviewError("already_requested" if answer.review_state is not None else "too_many")


def decisions_as_examples(question_id: str) -> list[dict[str, Any]]:
    """Stored decisions as ``examples.json`` entries (split "tune"), newest first."""
    rows = db.session.scalars(select(QuizReviewDecision).where(QuizReviewDecision.question_id == question_id)
                              .order_by(QuizReviewDecision.id.desc()))
    out = []
    for d in rows:
        expect = "full" if d.fraction >= 1 - 1e-9 else ("zero" if d.fraction <= 1e-9 else "partial")
        e = {"answer": d.answer_text, "expect": expect, "split": "tune", "note": f"teacher decision {d.id}"}
        if expect == "partial":
            e["score"] = round(d.fraction, 4)
        out.append(e)
    return out
