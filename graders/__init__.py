"""Everything the grading worker runs: workspace, sandbox, runners, harness and checks.

Nothing in this package imports Flask; the web app talks to graders only through
``GradeReport`` JSON and the ``python -m graders`` command line.
"""
