"""Homework 2's notebook route, part C (``nb.test_annotated``), when some annotations wait for a
teacher: the cell says so (never "fail" when waiting is the only shortfall), and a teacher's
decision settles it the way the upload route's field checks are settled (``merge_manual_scores``).

Fast: the check is scored from the annotated config read statically, no kernel is started."""
from __future__ import annotations

import json
import re

import pytest

from coursework import assignments
from coursework.config_annotation import annotate, catalogue
from coursework.report import merge_manual_scores
from graders.config_annotation import core, notebook

# These flows come after the fields earned trust (with none, every right note waits: see the last test).
pytestmark = pytest.mark.usefixtures("annotation_readings_trusted")

REPO = assignments.load("config_annotation").path
NB_SPEC = assignments.load("config_annotation").raw["checks"]["nb"]
UNSURE_STAGE = "3 级切优化器状态和梯度，参数每卡一份"  # the reading is unsure of this one
WRONG_CLIPPING = "a bigger global batch for every step"


def _reference_config() -> str:
    nb = json.loads((REPO / "samples" / "notebook_complete" / "submission.ipynb").read_text(encoding="utf-8"))
    found, value = notebook.static_answers(nb, {"annotated": "ANNOTATED_CONFIG"})["annotated"]
    assert found and isinstance(value, str)
    return value


def _with_notes(stage: str | None = None, clipping: str | None = None) -> str:
    src = _reference_config()
    if stage is not None:
        src = re.sub(r'("stage": 3,) // [^\n]*', lambda m: f"{m.group(1)} // {stage}", src)
    if clipping is not None:
        src = re.sub(r'("gradient_clipping": 1.0,) // [^\n]*', lambda m: f"{m.group(1)} // {clipping}", src)
    return src


def _part_c(source: str, max_pts: float = 40.0):
    return notebook._autograded_check(NB_SPEC, "test_annotated", max_pts, nb_score=max_pts, ran=True, problem=None,
                                      scored=notebook._static_score("annotated", source, max_pts), kernel_error=None)


def _no_placeholder(c) -> None:
    assert c.message["zh"] and c.message["en"]
    assert not re.search(r"\{[a-z_]+\}", c.message["zh"] + c.message["en"]), c.message


def test_the_premise_the_stage_note_waits_for_review() -> None:
    cat = catalogue.load()
    j = annotate.judge(UNSURE_STAGE, cat.rule("deepspeed", "zero_optimization.stage", 3), cat)
    assert j.needs_review, j  # if the reading grows sure of it, pick another unsure note here


def test_a_fully_right_config_passes_part_c() -> None:
    c = _part_c(_reference_config())
    assert (c.status.value, c.points) == ("pass", 40.0) and not c.evidence.get("waiting")


def test_part_c_waits_for_the_teacher_when_that_is_the_only_shortfall() -> None:
    c = _part_c(_with_notes(stage=UNSURE_STAGE))
    assert c.status.value == "warn", c
    assert 0 < c.points < 40.0
    assert set(c.evidence["waiting"]) == {"field.zero_optimization.stage"}
    assert c.points + sum(c.evidence["waiting"].values()) == pytest.approx(40.0, abs=0.02)
    assert "zero_optimization.stage" in c.message["en"] and "teacher" in c.message["en"].lower()
    assert "zero_optimization.stage" in c.message["zh"] and "老师" in c.message["zh"]
    _no_placeholder(c)


def test_a_real_wrong_annotation_still_fails_and_names_the_waiting_field_too() -> None:
    c = _part_c(_with_notes(stage=UNSURE_STAGE, clipping=WRONG_CLIPPING))
    assert c.status.value == "fail", c
    assert set(c.evidence["waiting"]) == {"field.zero_optimization.stage"}
    assert "zero_optimization.stage" in c.message["en"] and "teacher" in c.message["en"].lower()
    _no_placeholder(c)


def test_the_waiting_points_are_on_the_same_scale_as_the_field_checks_feedback() -> None:
    source = _with_notes(stage=UNSURE_STAGE)
    part_c = _part_c(source)
    feedback = {c.id: c for c in notebook.annotation_feedback(core.annotation_checks(source), 40.0, counted=True)}
    stage = feedback["field.zero_optimization.stage"]
    assert stage.evidence["review"] == "pending"
    assert stage.evidence["review_points"] == pytest.approx(part_c.evidence["waiting"]["field.zero_optimization.stage"])
    assert all(c.points == 0 and c.max_points == 0 for c in feedback.values())  # the points sit on part C


def test_no_teacher_review_when_part_c_counted_nothing() -> None:
    # the kernel was killed or the run's format check failed: part C is 0, so a decision on one of
    # its fields must not add points behind its back
    feedback = notebook.annotation_feedback(core.annotation_checks(_with_notes(stage=UNSURE_STAGE)), 40.0,
                                            counted=False)
    assert not any(c.evidence.get("review") == "pending" for c in feedback)
    stage = next(c for c in feedback if c.id == "field.zero_optimization.stage")
    assert "teacher" not in stage.message["en"].lower() and stage.evidence["review"] == "not_counted"


def _report(source: str) -> dict:
    part_c = _part_c(source)
    fields = notebook.annotation_feedback(core.annotation_checks(source), 40.0, counted=True)
    return {"assignment": "config_annotation", "score": part_c.points, "max_score": 40.0,
            "checks": [part_c.to_dict()] + [c.to_dict() for c in fields]}


@pytest.mark.parametrize("fraction,status", [(1.0, "pass"), (0.5, "fail"), (0.0, "fail")])
def test_a_teachers_decision_settles_part_c(fraction: float, status: str) -> None:
    report = _report(_with_notes(stage=UNSURE_STAGE))
    before = {c["id"]: c for c in report["checks"]}
    top = before["field.zero_optimization.stage"]["evidence"]["review_points"]
    merged = merge_manual_scores(report, {"field.zero_optimization.stage": {"score": round(top * fraction, 2)}})
    checks = {c["id"]: c for c in merged["checks"]}
    part_c, stage = checks["nb.test_annotated"], checks["field.zero_optimization.stage"]
    assert part_c["status"] == status
    assert part_c["points"] == pytest.approx(before["nb.test_annotated"]["points"] + round(top * fraction, 2))
    assert stage["points"] == 0 and stage["evidence"]["review"] == "decided"  # counted once, on part C
    assert merged["score"] == pytest.approx(report["score"] + round(top * fraction, 2))
    assert "teacher" in part_c["message"]["en"].lower() and "老师" in part_c["message"]["zh"]
    assert "wait" not in part_c["message"]["en"].lower()
    assert not re.search(r"\{[a-z_]+\}", part_c["message"]["zh"] + part_c["message"]["en"])


def test_part_c_keeps_waiting_for_the_fields_not_yet_decided() -> None:
    report = _report(_with_notes(stage=UNSURE_STAGE))
    part_c = report["checks"][0]
    # a second waiting field, as the grader would write it
    part_c["evidence"]["waiting"]["field.zero_optimization.overlap_comm"] = 2.0
    part_c["points"] -= 2.0
    report["checks"].append({"id": "field.zero_optimization.overlap_comm", "status": "warn", "points": 0.0,
                             "max_points": 0.0, "title": {"zh": "x", "en": "x"},
                             "evidence": {"review": "pending", "review_points": 2.0, "counted_in": "nb.test_annotated"}})
    top = next(c for c in report["checks"] if c["id"] == "field.zero_optimization.stage")["evidence"]["review_points"]
    merged = merge_manual_scores(report, {"field.zero_optimization.stage": {"score": top}})
    c = merged["checks"][0]
    assert c["status"] == "warn" and c["points"] == pytest.approx(part_c["points"] + top)
    assert "overlap_comm" in c["message"]["en"] and "zero_optimization.stage" not in c["message"]["en"]
    both = merge_manual_scores(report, {"field.zero_optimization.stage": {"score": top},
                                        "field.zero_optimization.overlap_comm": {"score": 2.0}})
    assert both["checks"][0]["status"] == "pass" and both["checks"][0]["points"] == pytest.approx(40.0, abs=0.02)
    assert both["score"] == pytest.approx(40.0, abs=0.02)


def test_where_the_course_confirms_full_marks_the_reference_config_waits_on_its_unweighted_fields(monkeypatch) -> None:
    """``fields.confirm_full_marks: unweighted``: the reference notebook's part C is not failed; the
    fields without a weight of their own (micro-batch, clipping, pinned memory, ...) wait for a
    teacher, the weighted ones (stage, offload, overlap) count at once."""
    cfg = core.load_config()
    cfg["fields"]["confirm_full_marks"] = "unweighted"
    monkeypatch.setattr(core, "load_config", lambda *a, **k: json.loads(json.dumps(cfg)))
    c = _part_c(_reference_config())
    assert c.status.value == "warn", c
    waiting = set(c.evidence["waiting"])
    assert "field.gradient_clipping" in waiting and "field.train_micro_batch_size_per_gpu" in waiting, waiting
    assert not waiting & {"field.zero_optimization.stage", "field.zero_optimization.offload_optimizer"}, waiting
    assert c.points + sum(c.evidence["waiting"].values()) == pytest.approx(40.0, abs=0.02)
    _no_placeholder(c)


def test_with_no_trust_earned_a_fully_right_config_waits_and_is_never_failed(monkeypatch) -> None:
    """The shipped default: before teachers' decisions, part C of a fully right notebook
    counts nothing yet and says it waits for the teacher: never "fail", and every point is waiting."""
    monkeypatch.delenv(core.TRUSTED_ENV)
    c = _part_c(_reference_config())
    assert c.status.value == "warn", c
    assert c.points + sum(c.evidence["waiting"].values()) == pytest.approx(40.0, abs=0.02)
    assert sum(c.evidence["waiting"].values()) > 0
    _no_placeholder(c)
