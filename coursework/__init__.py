"""What the web app and the grading worker share: the course's content and the result model.

Bilingual text (``text``), settings read when asked (``settings``), assignments and upload
validation (``assignments``), the report model (``report``), the progress-file contract between a
grader and its worker (``progress``), memory arithmetic (``memory_calc``) and the quiz bank with
its grading (``quiz``). Nothing here imports Flask, runs student code or touches the sandbox:
``server/`` imports this package and never ``graders/`` (``tests/server/test_boundary.py``).
"""
