"""Quiz grading without a web server: question folders, variants, graders per question type.

Everything here is pure (no Flask, no database): the web blueprint, the CLI and the tests
call ``bank.load_question`` and ``grading.grade`` with a seed and the student's raw text.
"""
