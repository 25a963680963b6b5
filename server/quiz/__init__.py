"""Self-test quizzes in the browser: attempts, instant per-question feedback, results, history.

Grading itself lives in ``coursework.quiz`` (pure); this package stores attempts and answers
(``models``), applies the quiz rules (``attempts``), serves the pages (``views``) and adds
``flask quiz grade`` (``cli``).
"""
