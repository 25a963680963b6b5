"""Homework 2's annotations waiting for a teacher, kept as rows beside the stored report.

A field whose reading has not earned the teachers' trust (or that the reading is unsure of) counts
nothing until a teacher decides it; its report check keeps the reading's suggestion
(``evidence.provisional_points``; on the notebook route, part C's ``evidence.provisional``).
``ProvisionalField`` holds those suggestions as rows, so that one SQL expression
(``server.scores.hand_scores``) can count them where the course counts unconfirmed verdicts and
mark them everywhere else, without reading report JSON. A teacher's decision is a
``ManualCellScore`` with the same check id: from then on the row is settled, not unconfirmed.

The rows follow the report: ``sync`` after a bulk write of ``report_json`` (the lifecycle's
compare-and-set), and the ``before_flush`` listener after any ORM write of it.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import delete, event, inspect, insert
from sqlalchemy.orm import Session

from server.scores.models import ProvisionalField
from server.extensions import db
from server.models import Submission


def rows_of(report: dict[str, Any] | None) -> dict[str, float]:
    """Check id -> suggested points of every annotation in ``report`` that waits for a teacher."""
    out: dict[str, float] = {}
    for c in (report or {}).get("checks") or []:
        if not isinstance(c, dict):
            continue
        ev = c.get("evidence") or {}
        cid = str(c.get("id", ""))[:120]
        if ev.get("review") == "pending" and cid.startswith("field."):
            out[cid] = _points(ev.get("provisional_points"))
        suggested, waiting = ev.get("provisional"), ev.get("waiting") or {}
        if isinstance(suggested, dict):  # the notebook route: part C's waiting fields, on its scale
            for field_id, pts in suggested.items():
                if str(field_id).startswith("field.") and field_id in waiting:
                    out[str(field_id)[:120]] = _points(pts)
    return out


def _points(value: Any) -> float:
    try:
        return max(0.0, round(float(value), 4))
    except (TypeError, ValueError):
        return 0.0


def sync(submission_id: int, report: dict[str, Any] | None, session=None) -> None:
    """Replace the rows of ``submission_id`` with those of ``report`` (not committed)."""
    run = (session or db.session).connection().execute
    run(delete(ProvisionalField).where(ProvisionalField.submission_id == submission_id))
    rows = [{"submission_id": submission_id, "check_id": cid, "provisional": pts} for cid, pts in rows_of(report).items()]
    if rows:
        run(insert(ProvisionalField), rows)


_PENDING = "provisional_fields.pending"


@event.listens_for(Session, "before_flush")
def _follow_reports(session: Session, _context, _instances) -> None:
    """An ORM write of a submission's report (tests, an admin edit) moves its rows after the flush
    (a new submission has no id before it)."""
    for obj in list(session.new) + list(session.dirty):
        if isinstance(obj, Submission) and "report_json" in obj.__dict__ and (
                obj in session.new or inspect(obj).attrs.report_json.history.has_changes()):
            session.info.setdefault(_PENDING, []).append(obj)


@event.listens_for(Session, "after_flush")
def _write_rows(session: Session, _context) -> None:
    for obj in session.info.pop(_PENDING, []):
        sync(obj.id, obj.__dict__.get("report_json"), session)
