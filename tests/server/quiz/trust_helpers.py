"""Test helpers for earned trust: a graded copy of the self-test, and trust earned on a question
by the labels that earn it (30 agreeing teacher decisions, the rule in ``coursework.trust``); trust is
per kind of verdict, so ``share`` picks which kind (1.0 full marks, 0.0 zeros)."""
from __future__ import annotations

from coursework.quiz.bank import load_quiz
from server.extensions import db
from server.quiz import labels


def graded_selftest(monkeypatch) -> None:
    """``ch7_3_selftest`` in graded mode for this test (attempts copy the quiz's mode at start)."""
    monkeypatch.setattr(load_quiz("ch7_3_selftest"), "mode", "graded")


def earn_trust(question_id: str, reader: str = "rule", n: int = 30, share: float | None = None) -> None:
    """``n`` distinct answers decided at ``share`` where ``reader`` suggested the same (inside an app
    context): trust in that kind of verdict. ``share`` None: trust in every kind (full, a half, zero)."""
    for s in ((1.0, 0.5, 0.0) if share is None else (share,)):
        for i in range(n):
            labels.record(question_id, f"labelled answer number {i} worth {s:g}", s, {reader: s}, "group", None, None)
    db.session.commit()
    labels.forget()
