"""One row per similarity run of a homework in a course: requested (by an instructor, or by the
deadline passing), queued behind every first grading, run by a worker, its result stored as JSON.

The result names submissions by id (``sub:<id>``) and earlier-term files by corpus path
(``ref:<path>``) and keeps only pairs, clusters and character ranges: the side-by-side view reads
the texts again from the submissions, so a result row stays small and holds no student's code.
"""
from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from server.extensions import db
from server.models import utcnow


class RunStatus(str, Enum):
    QUEUED = "queued"  # waiting in the database until no first grading waits
    RUNNING = "running"  # a worker took it
    DONE = "done"
    ERROR = "error"  # the comparison raised (staff see the traceback)


class SimilarityRun(db.Model):
    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    assignment_id: Mapped[str] = mapped_column(String(80))
    status: Mapped[str] = mapped_column(String(20), default=RunStatus.QUEUED.value, index=True)
    trigger: Mapped[str] = mapped_column(String(20), default="manual")  # manual | deadline
    requested_by: Mapped[int | None] = mapped_column(ForeignKey("user.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(80), nullable=True)
    enqueue_gen: Mapped[int] = mapped_column(Integer, default=0)
    summary_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    result_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, deferred=True)
    error_detail: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)
