"""Homework 2's notebook route with the real nbgrader and the real sandboxed kernel.

The samples walk covers the outcomes (complete, partly wrong, tampered, endless loop,
malformed); these tests check what the samples cannot: the committed release is what
nbgrader generates now, the kernel really ran inside the sandbox, and the instructor's
manual scores give the same total in nbgrader's gradebook and in our report.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from graders import assignments
from graders.config_annotation import notebook, release

SAMPLES = Path(__file__).resolve().parents[2] / "assignments" / "config_annotation" / "samples"


@pytest.mark.slow
def test_committed_release_is_what_nbgrader_generates() -> None:
    assert release.main(["--check"]) == 0, "run: python -m graders.config_annotation.release"


@pytest.mark.slow
def test_release_has_no_solutions_or_hidden_tests() -> None:
    cells = json.loads(release.RELEASE.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and "mapping_score" not in text
    assert '"zero_optimization.stage": None' in text


@pytest.mark.slow
def test_manual_scores_agree_with_nbgrader_gradebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbgrader.api import Gradebook

    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "var"))
    job = tmp_path / "job"
    job.mkdir()
    upload = job / "submission.ipynb"
    shutil.copyfile(SAMPLES / "notebook_complete" / "submission.ipynb", upload)
    assignment = assignments.load("config_annotation")
    report = notebook.grade_notebook(assignment, job, upload, "cpu")

    assert report.check("notebook.execute").status.value == "pass"
    if os.geteuid() == 0 and shutil.which("bwrap"):
        assert "bwrap" in report.sandbox["layers"] and any(l.startswith("uid:") for l in report.sandbox["layers"])
    manual = report.plots["manual_cells"]
    assert [m["cell_id"] for m in manual] == ["explain_tradeoff", "explain_choice"]
    assert all(m["max_points"] == 5.0 and "D" in m["source"] for m in manual)

    scores = {"explain_tradeoff": {"score": 3.5, "comment": "name the all-gathers"}, "explain_choice": {"score": 5}}
    merged = notebook.merge_manual_scores(report.to_dict(), scores)
    with Gradebook(f"sqlite:///{job / 'course' / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook("config_annotation", "config_annotation", notebook.STUDENT)
        for grade in sub.grades:
            if grade.name in scores:
                grade.manual_score = scores[grade.name]["score"]
        gb.db.commit()
        nb_total, nb_max = sub.score, sub.max_score
    assert merged["score"] == pytest.approx(nb_total) == pytest.approx(48.5)
    assert report.max_score == pytest.approx(nb_max) == pytest.approx(50)
