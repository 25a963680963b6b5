"""Quiz tables: one row per attempt, one row per graded answer.

``QuizAnswer`` keeps everything the instructor statistics need without regrading: the
variant seed (so the exact numbers can be regenerated), the raw answer, the per-question
score and fraction, the chosen option ids and the rubric items met/missing/confused
(``details_json``), and how many format errors preceded it.
"""
from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from server.extensions import db
from server.models import utcnow


class AttemptStatus(str, Enum):
    OPEN = "open"  # answering
    SUBMITTED = "submitted"  # finished by the student; counts for the gradebook
    EXPIRED = "expired"  # closed by the time window; answered questions still count


class QuizAttempt(db.Model):
    __table_args__ = (UniqueConstraint("user_id", "quiz_id", "attempt_no"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    course_id: Mapped[int | None] = mapped_column(ForeignKey("course.id"), index=True, nullable=True)
    quiz_id: Mapped[str] = mapped_column(String(120), index=True)
    attempt_no: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(String(10))  # practice | graded (copied from the quiz at start)
    status: Mapped[str] = mapped_column(String(10), default=AttemptStatus.OPEN.value, index=True)
    question_ids: Mapped[list[str]] = mapped_column(JSON)  # frozen at start: later bank edits don't shift it
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    closes_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    score: Mapped[float] = mapped_column(Float, default=0.0)
    max_score: Mapped[float] = mapped_column(Float, default=0.0)

    answers: Mapped[list["QuizAnswer"]] = relationship(back_populates="attempt", order_by="QuizAnswer.position")

    @property
    def is_open(self) -> bool:
        return self.status == AttemptStatus.OPEN.value

    def answer_for(self, question_id: str) -> "QuizAnswer | None":
        return next((a for a in self.answers if a.question_id == question_id), None)


class QuizAnswer(db.Model):
    __table_args__ = (UniqueConstraint("attempt_id", "question_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("quiz_attempt.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    quiz_id: Mapped[str] = mapped_column(String(120), index=True)
    question_id: Mapped[str] = mapped_column(String(160), index=True)
    position: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)  # the variant: regenerate params/answer from it
    lang: Mapped[str] = mapped_column(String(5), default="zh")
    raw_answer: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    max_score: Mapped[float] = mapped_column(Float)
    fraction: Mapped[float] = mapped_column(Float)
    correct: Mapped[bool] = mapped_column(Boolean, index=True)
    format_errors: Mapped[int] = mapped_column(Integer, default=0)  # rejected tries before this one
    details_json: Mapped[dict[str, Any]] = mapped_column(JSON)  # chosen ids, rubric met/missing/confused
    feedback_json: Mapped[list[dict[str, str]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # Teacher review (free text): None = graded at once; "pending" = the rubric was unsure and the
    # answer scores nothing until a teacher decides; "requested" = graded at once, the student
    # asked for a review (once, with ``review_comment``); "reviewed" = a teacher decided.
    review_state: Mapped[str | None] = mapped_column(String(12), nullable=True, index=True)
    review_comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    auto_score: Mapped[float | None] = mapped_column(Float, nullable=True)  # the rubric's reading, kept after review
    reviewed_by: Mapped[int | None] = mapped_column(ForeignKey("user.id"), nullable=True)
    reviewed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)

    attempt: Mapped[QuizAttempt] = relationship(back_populates="answers")


class ReviewState(str, Enum):
    PENDING = "pending"
    REQUESTED = "requested"
    REVIEWED = "reviewed"


class QuizReviewDecision(db.Model):
    """One teacher decision on a group of similar answers to one question: applied to every
    answer of the group, and kept as a graded example (``flask quiz decisions``)."""

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int | None] = mapped_column(ForeignKey("course.id"), index=True, nullable=True)
    question_id: Mapped[str] = mapped_column(String(160), index=True)
    group_key: Mapped[str] = mapped_column(String(64))
    answer_text: Mapped[str] = mapped_column(Text)  # the group's first answer, as typed
    fraction: Mapped[float] = mapped_column(Float)
    rubric_reading: Mapped[dict[str, Any]] = mapped_column(JSON)  # what the rubric found, for the regression example
    answers: Mapped[int] = mapped_column(Integer)  # how many answers the decision graded
    decided_by: Mapped[int] = mapped_column(ForeignKey("user.id"))
    decided_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ReaderLabel(db.Model):
    """One answer a teacher decided, kept as a labelled example across terms: the points given (as
    a share) and what each reader had suggested (``readings``: reader -> share, or None where it
    had no reading). ``item`` is the question id, or ``annotation:<dialect>:<field path>`` for a
    homework 2 note; agreement and earned trust are counted per (reader, item)
    (``coursework.trust``). One row per distinct answer text per item: deciding it again replaces
    the label."""

    __table_args__ = (UniqueConstraint("item", "answer_hash"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str] = mapped_column(String(200), index=True)
    answer_hash: Mapped[str] = mapped_column(String(64))
    answer_text: Mapped[str] = mapped_column(Text)
    detail: Mapped[str] = mapped_column(String(200), default="")  # homework 2: the field's value
    decided: Mapped[float] = mapped_column(Float)  # the teacher's share of the points
    readings: Mapped[dict[str, Any]] = mapped_column(JSON)
    how: Mapped[str] = mapped_column(String(20), default="group")  # group | asked | sample
    course_id: Mapped[int | None] = mapped_column(ForeignKey("course.id"), nullable=True)
    decided_by: Mapped[int | None] = mapped_column(ForeignKey("user.id"), nullable=True)
    decided_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
