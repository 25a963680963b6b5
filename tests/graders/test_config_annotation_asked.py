"""A student asked a teacher to look at an auto-graded annotation ("I think this is
right"): the teacher's decision REPLACES the field's automatic points (never added on top), on the
report's own scale; on the notebook route, whose field points are counted inside part C, it replaces
the field's share of part C, and a field whose part C counted nothing cannot be asked."""
from __future__ import annotations

import re

import pytest

from coursework.report import merge_manual_scores
from graders.config_annotation import core, notebook
from tests.fixtures.annotation_reports import config_source, stage_check, upload_report

# Asking is about points that counted at once: fields whose reading earned trust.
pytestmark = pytest.mark.usefixtures("annotation_readings_trusted")

SURE_WRONG = "ZeRO-3 keeps a full copy of the parameters on every card"  # read confidently as wrong
SURE_RIGHT = "shards parameters, gradients and optimizer states (= FSDP full_shard)"



def test_the_premise_the_wrong_note_is_auto_graded_not_pending() -> None:
    stage = stage_check(upload_report(SURE_WRONG))
    assert stage["evidence"].get("review") is None and stage["points"] < stage["max_points"]


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.0])
def test_an_asked_decision_replaces_the_auto_points(fraction: float) -> None:
    report = upload_report(SURE_WRONG)
    stage = stage_check(report)
    auto, top = stage["points"], stage["max_points"]
    given = round(top * fraction, 2)
    merged = merge_manual_scores(report, {"field.zero_optimization.stage": {"score": given, "asked": True}})
    got = stage_check(merged)
    assert got["points"] == pytest.approx(given)  # replaced, not auto + given
    assert merged["score"] == pytest.approx(report["score"] - auto + given)
    assert got["status"] == ("pass" if fraction == 1.0 else "fail")
    assert got["evidence"]["review"] == "decided" and got["evidence"]["asked"] is True
    assert got["evidence"]["auto_points"] == pytest.approx(auto)
    assert "teacher" in got["message"]["en"].lower() and "老师" in got["message"]["zh"]
    assert not re.search(r"\{[a-z_]+\}", got["message"]["zh"] + got["message"]["en"])


def test_an_asked_decision_can_lower_a_right_field_too() -> None:
    report = upload_report(SURE_RIGHT)
    stage = stage_check(report)
    merged = merge_manual_scores(report, {"field.zero_optimization.stage": {"score": 0.0, "asked": True}})
    assert stage_check(merged)["points"] == 0 and merged["score"] == pytest.approx(report["score"] - stage["points"])


@pytest.mark.parametrize("score", [-0.01, 1000.0])
def test_an_asked_score_outside_the_field_max_is_refused(score: float) -> None:
    with pytest.raises(ValueError):
        merge_manual_scores(upload_report(SURE_WRONG), {"field.zero_optimization.stage": {"score": score, "asked": True}})


def test_a_decision_on_an_auto_graded_field_nobody_asked_about_is_refused() -> None:
    with pytest.raises(ValueError):
        merge_manual_scores(upload_report(SURE_WRONG), {"field.zero_optimization.stage": {"score": 1.0}})


def test_the_input_report_is_not_changed() -> None:
    report = upload_report(SURE_WRONG)
    before = repr(report)
    merge_manual_scores(report, {"field.zero_optimization.stage": {"score": 0.0, "asked": True}})
    assert repr(report) == before


def _notebook_report(note: str, counted: bool) -> dict:
    """Part C (40 points) scored from a config whose stage note is ``note``, with the field checks
    counted inside it (``counted`` False: the run gave part C nothing)."""
    from coursework import assignments
    from coursework.report import GradeReport

    src = config_source(note)
    spec = assignments.load("config_annotation").raw["checks"]["nb"]
    r = GradeReport(assignment="config_annotation")
    r.add(notebook._autograded_check(spec, "test_annotated", 40.0, nb_score=40.0, ran=True, problem=None,
                                     scored=notebook._static_score("annotated", src, 40.0), kernel_error=None))
    for c in notebook.annotation_feedback(core.annotation_checks(src), 40.0, counted=counted):
        r.add(c)
    return r.to_dict()


def test_a_notebook_route_decision_replaces_the_fields_share_of_part_c() -> None:
    """Part C holds these fields' points (``counted_in``): the field carries its share of part C
    (``counted_points`` of ``counted_max``), and an asked decision replaces that share inside part C,
    never adding on top of it nor counting on the field's own 0."""
    from coursework.report import askable_field

    report = _notebook_report(SURE_WRONG, counted=True)
    stage = stage_check(report)
    share, top = stage["evidence"]["counted_points"], stage["evidence"]["counted_max"]
    assert stage["evidence"]["counted_in"] == "nb.test_annotated" and askable_field(stage) and share < top
    merged = merge_manual_scores(report, {"field.zero_optimization.stage": {"score": top, "asked": True}})
    part_c = {c["id"]: c for c in merged["checks"]}["nb.test_annotated"]
    before = {c["id"]: c for c in report["checks"]}["nb.test_annotated"]
    assert part_c["points"] == pytest.approx(before["points"] - share + top, abs=0.011)
    assert merged["score"] == pytest.approx(report["score"] - share + top, abs=0.011)
    assert stage_check(merged)["points"] == 0  # counted once, on part C
    with pytest.raises(ValueError):  # beyond the field's share of part C
        merge_manual_scores(report, {"field.zero_optimization.stage": {"score": top + 1, "asked": True}})


def test_a_notebook_field_whose_part_c_counted_nothing_cannot_be_asked() -> None:
    from coursework.report import askable_field

    report = _notebook_report(SURE_WRONG, counted=False)
    assert askable_field(stage_check(report)) is False
    with pytest.raises(ValueError):
        merge_manual_scores(report, {"field.zero_optimization.stage": {"score": 0.0, "asked": True}})
    assert askable_field(stage_check(upload_report(SURE_WRONG))) is True
    assert askable_field(stage_check(upload_report("full_shard：切梯度和优化器状态，参数每卡一份？可能吧"))) is False  # pending