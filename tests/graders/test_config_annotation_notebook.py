"""Homework 2's notebook route with the real nbgrader and the real sandboxed kernel.

The samples walk covers the outcomes (complete, partly wrong, tampered, format check faked,
reads the answer key, endless loop, malformed); these tests check what the samples cannot:
the committed release is what nbgrader generates now, the kernel really ran inside the
sandbox and could read none of the grading data, and the instructor's manual scores give the
same total in nbgrader's gradebook and in our report.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from coursework import assignments
from coursework.report import merge_manual_scores
from graders import sandbox
from graders.config_annotation import notebook, release

# The nbgrader agreement is about counted points: fields whose reading earned trust.
pytestmark = pytest.mark.usefixtures("annotation_readings_trusted")

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "assignments" / "config_annotation" / "samples"


def _grade_sample(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nbgrader_templates):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(nbgrader_templates(tmp_path / "var")))  # the generated course shared
    job = tmp_path / "job"
    job.mkdir()
    upload = job / "submission.ipynb"
    shutil.copyfile(SAMPLES / name / "submission.ipynb", upload)
    return notebook.grade_notebook(assignments.load("config_annotation"), job, upload, "cpu"), job


def _grading_secrets() -> list[str]:
    """Lines only the grading data holds: none may reach the kernel's outputs or the report."""
    folder = REPO / "assignments" / "config_annotation"
    key_lines = [l.strip().rstrip(",") for l in (folder / "answer_key.json").read_text(encoding="utf-8").splitlines()
                 if '": "' in l]  # every reference pair: "fp16.loss_scale": "loss_scaling"
    return [*key_lines, "max_gb_per_card", "# Homework 2 catalogue", "negators:", "### BEGIN SOLUTION",
            "def grade_scenario"]


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
def test_the_kernel_cannot_read_the_answer_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               nbgrader_templates) -> None:
    report, job = _grade_sample("notebook_reads_answer_key", tmp_path, monkeypatch, nbgrader_templates)

    assert report.check("notebook.execute").status.value == "pass"
    graded = (job / "course" / "autograded" / notebook.STUDENT / "config_annotation" / "config_annotation.ipynb"
              ).read_text(encoding="utf-8")
    outputs = ["".join(o.get("text", "")) for c in json.loads(graded)["cells"] for o in c.get("outputs", [])]
    printed = [t.split("HOSTILE-RESULT ", 1)[1].splitlines()[0] for t in outputs if "HOSTILE-RESULT " in t]
    assert printed, "the hostile cell printed nothing: it did not run"
    attempts = json.loads(printed[0])
    assert str(REPO / "assignments" / "config_annotation" / "answer_key.json") in attempts  # it looked in the right place
    assert str(REPO / "assignments" / "config_annotation" / "catalogue.yaml") in attempts
    read = {path: how for path, how in attempts.items() if not how.startswith("failed")}
    assert read == {}, f"the kernel read grading data: {list(read)}"
    assert attempts["import"].startswith("failed: ModuleNotFoundError"), attempts["import"]
    if os.geteuid() == 0 and sandbox.find_bwrap():
        # the kernel's mount namespace binds an allow-list: no repository folder exists in it at all
        assert {"allow-list", "bwrap", "netns:loopback"} <= set(report.sandbox["layers"])
    shown = json.dumps(report.to_dict(), ensure_ascii=False) + graded
    assert "HOSTILE-LEAK {}" in report.logs["kernel"]  # what it found, on the kernel's stderr: nothing
    leaked = [s for s in _grading_secrets() if s in shown]
    assert leaked == []


@pytest.mark.slow
def test_manual_scores_agree_with_nbgrader_gradebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     nbgrader_templates) -> None:
    from nbgrader.api import Gradebook

    report, job = _grade_sample("notebook_complete", tmp_path, monkeypatch, nbgrader_templates)

    assert report.check("notebook.execute").status.value == "pass"
    if os.geteuid() == 0 and sandbox.find_bwrap():
        assert "bwrap" in report.sandbox["layers"] and any(l.startswith("uid:") for l in report.sandbox["layers"])
    manual = report.plots["manual_cells"]
    assert [m["cell_id"] for m in manual] == ["explain_tradeoff", "explain_choice"]
    assert all(m["max_points"] == 10.0 and "D" in m["source"] for m in manual)

    scores = {"explain_tradeoff": {"score": 7.5, "comment": "name the all-gathers"}, "explain_choice": {"score": 10}}
    merged = merge_manual_scores(report.to_dict(), scores)
    with Gradebook(f"sqlite:///{job / 'course' / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook("config_annotation", "config_annotation", notebook.STUDENT)
        for grade in sub.grades:
            if grade.name in scores:
                grade.manual_score = scores[grade.name]["score"]
        gb.db.commit()
        nb_total, nb_max = sub.score, sub.max_score
    assert merged["score"] == pytest.approx(nb_total) == pytest.approx(97.5)
    assert report.max_score == pytest.approx(nb_max) == pytest.approx(100)  # the assignment total, as a plain config
