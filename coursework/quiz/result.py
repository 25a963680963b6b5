"""The result of grading one answer: a small dataclass that crosses into JSON and the database."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from coursework.text import pick

Text = dict[str, str]  # {"zh": ..., "en": ...}


class AnswerStatus(str, Enum):
    GRADED = "graded"  # counts as an answer
    FORMAT_ERROR = "format_error"  # not understood; the student may resubmit, no attempt used
    NEEDS_REVIEW = "needs_review"  # answered; the rubric is unsure, a teacher confirms the score (0 until then)


class FormatError(ValueError):
    """An answer the grader cannot read (empty, too long, NaN, wrong unit kind, unknown option)."""

    def __init__(self, message: Text, code: str = "format"):
        super().__init__(message.get("en", ""))
        self.message = message
        self.code = code


@dataclass
class QuestionResult:
    """Score and feedback for one answer to one variant of one question.

    ``details`` keeps what the statistics views need: the chosen option ids, the rubric items
    met, missing and confused, a detected unit confusion, the normalised value.
    """

    question_id: str
    status: AnswerStatus
    score: float
    max_score: float
    feedback: list[Text] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        return self.score / self.max_score if self.max_score else 0.0

    @property
    def needs_review(self) -> bool:
        return self.status == AnswerStatus.NEEDS_REVIEW

    @property
    def provisional_fraction(self) -> float:
        """The rubric's own reading (what a review starts from); the score itself for a graded answer."""
        return float(self.details.get("provisional_fraction", self.fraction))

    @property
    def correct(self) -> bool:
        return self.status == AnswerStatus.GRADED and self.score >= self.max_score - 1e-9

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    def feedback_text(self, lang: str) -> list[str]:
        """Feedback lines in one language (falls back to the other one)."""
        return [pick(m, lang) for m in self.feedback]


def format_error(question_id: str, max_score: float, err: FormatError) -> QuestionResult:
    """A result that uses no attempt and tells the student what to fix."""
    return QuestionResult(question_id=question_id, status=AnswerStatus.FORMAT_ERROR, score=0.0,
                          max_score=max_score, feedback=[err.message], details={"error": err.code})
