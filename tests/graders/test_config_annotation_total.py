"""Scores mean one thing everywhere: every route of every assignment is out of the total its
``assignment.json`` defines (the gradebook's), and the samples say so (``out_of``)."""
from __future__ import annotations

import json

import pytest

from coursework import assignments, settings
from graders.config_annotation import core, notebook
from server.homework.points import assignment_total

ASSIGNMENTS = sorted(p.name for p in settings.assignments_dir().iterdir() if (p / "assignment.json").exists())
HW2 = assignments.load("config_annotation")


def _samples(aid: str) -> list[tuple[str, dict]]:
    folder = settings.assignments_dir() / aid / "samples"
    return [(p.name, json.loads((p / "expected.json").read_text("utf-8")))
            for p in sorted(folder.iterdir()) if (p / "expected.json").exists()]


@pytest.mark.parametrize("aid", ASSIGNMENTS)
def test_every_declared_out_of_is_the_assignment_total(aid: str) -> None:
    total = assignment_total(assignments.load(aid))
    for name, expected in _samples(aid):
        if "out_of" in expected:
            assert expected["out_of"] == total, f"{aid}/{name}: out of {expected['out_of']}, total {total}"


def test_every_graded_homework_2_sample_declares_it_is_out_of_the_total() -> None:
    """Both routes (a plain config, a notebook) have samples, and each graded one is checked
    out of 100 by test_samples (which compares the report's ``max_score`` with ``out_of``)."""
    graded = [(n, e) for n, e in _samples("config_annotation") if e.get("status", "graded") != "rejected"]
    assert {n.split("_")[0] for n, _ in graded} >= {"notebook", "json", "yaml"}
    assert all(e.get("out_of") == assignment_total(HW2) == 100 for _, e in graded), graded


def test_the_notebook_routes_cells_add_up_to_the_total() -> None:
    source = json.loads((HW2.path / "source" / "config_annotation" / "config_annotation.ipynb").read_text("utf-8"))
    cells = notebook._cells_by_id(source)
    assert notebook.notebook_points(cells) == assignment_total(HW2) == 100
    notebook.check_points_match_total(cells, HW2.raw)  # does not raise
    with pytest.raises(ValueError, match="add up to 100 points"):
        notebook.check_points_match_total(cells, {**HW2.raw, "total_points": 60})


@pytest.mark.parametrize("source,name", [
    ('{\n  "zero_optimization": {"stage": 2}  // shards optimizer states and gradients\n}\n', "c.json"),
    ("fsdp: full_shard auto_wrap  # 切参数梯度优化器状态\n", "c.yaml"),
    ("just: a mapping\n", "c.yaml"),  # not a config: still out of 100
])
def test_the_plain_file_route_is_out_of_the_total(source: str, name: str) -> None:
    checks = core.grade_config_text(source, name)
    assert round(sum(c.max_points for c in checks), 4) == assignment_total(HW2) == 100
