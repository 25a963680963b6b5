"""Self-test quizzes in the browser: attempts, instant per-question feedback, results, history.

Grading itself lives in ``coursework.quiz`` (pure); this package stores attempts and answers
(``models``), applies the quiz rules (``attempts``), serves the pages (``views``) and adds
``flask quiz grade`` (``cli``).
"""
from server.quiz import models  # noqa: F401  (tables register with the metadata)
from server.quiz.cli import register_cli
from server.quiz.views import bp

register_cli(bp)


def _warm_rubrics() -> None:
    """Free-text rubrics compiled at import (each worker, before its first request)."""
    from coursework.quiz import rubric
    from coursework.quiz.bank import all_question_ids, load_question

    questions = [load_question(q) for q in all_question_ids()]
    rubric.warm([rubric.compile_rubric(q.info["rubric"]) for q in questions if q.type == "text"])


_warm_rubrics()

__all__ = ["bp"]
