"""Test helpers for earned trust: a graded copy of the self-test, and trust earned on a question
by the labels that earn it (30 agreeing teacher decisions, the rule in ``coursework.trust``)."""
from __future__ import annotations

from coursework.quiz.bank import load_quiz
from server.extensions import db
from server.quiz import labels


def graded_selftest(monkeypatch) -> None:
    """``ch7_3_selftest`` in graded mode for this test (attempts copy the quiz's mode at start)."""
    monkeypatch.setattr(load_quiz("ch7_3_selftest"), "mode", "graded")


def earn_trust(question_id: str, reader: str = "rule", n: int = 30, share: float = 1.0) -> None:
    """``n`` distinct answers decided at ``share`` where ``reader`` suggested the same (inside an app context)."""
    for i in range(n):
        labels.record(question_id, f"labelled answer number {i}", share, {reader: share}, "group", None, None)
    db.session.commit()
    labels.forget()
