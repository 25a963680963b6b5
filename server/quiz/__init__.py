"""Self-test quizzes in the browser: attempts, instant per-question feedback, results, history.

Grading itself lives in ``graders.quiz`` (pure); this package stores attempts and answers
(``models``), applies the quiz rules (``attempts``), serves the pages (``views``) and adds
``flask quiz grade`` (``cli``).
"""
from server.quiz import models  # noqa: F401  (tables register with the metadata)
from server.quiz.cli import register_cli
from server.quiz.views import bp

register_cli(bp)

__all__ = ["bp"]
