"""Everything the grading worker runs.

The machinery every homework shares sits here (workspace, sandbox, torchrun runner, harness,
evidence, the shared checks in ``checks``); each homework's own code is a package named by its
``assignment.json``'s ``grader``: ``ddp_speedup`` (homework 1), ``config_annotation`` (homework 2),
``fsdp_fit`` (homework 3). Nothing in this package imports Flask; the web app talks to graders only
through ``GradeReport`` JSON and the ``python -m graders`` command line.
"""
