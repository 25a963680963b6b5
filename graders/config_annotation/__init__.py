"""Homework 2 (``config_annotation``): map every DeepSpeed / FSDP field to a chapter concept.

Two routes, one core (``grade.py``): a plain annotated config (YAML with ``#`` comments or
JSON with ``//`` comments) is graded directly; an nbgrader notebook is autograded by
``notebook.py`` with its kernel inside the sandbox, and its ``ANNOTATED_CONFIG`` answer goes
through the same core. Entry point ``grade(assignment, job, files, mode)``.
"""
from __future__ import annotations

import time
from pathlib import Path

from coursework.assignments import Assignment
from coursework.report import GradeReport, text


def grade(assignment: Assignment, job: Path, files: list[Path], mode: str = "cpu") -> GradeReport:
    """Grade one upload (a config file or the completed notebook)."""
    from graders.config_annotation import core, notebook

    started = time.monotonic()
    path = files[0]
    cfg = {**assignment.raw}
    if path.suffix.lower() == ".ipynb":
        report = notebook.grade_notebook(assignment, job, path, mode)
    else:
        report = GradeReport(assignment=assignment.id, mode=mode)
        for check in core.grade_config_text(path.read_text(encoding="utf-8-sig"), path.name, cfg):
            report.add(check)
    report.summary = text(f"得分 {report.score:g} / {report.max_score:g}。",
                          f"Score {report.score:g} / {report.max_score:g}.")
    report.timings["total_s"] = round(time.monotonic() - started, 2)
    return report
