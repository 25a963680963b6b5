"""Homework 2 under ``fields.confirm_full_marks: untrusted`` (issue 23): a note's points count at once
only on fields whose reading earned trust from teachers' decisions (named by the worker in
``DISTGRADE_TRUSTED_READINGS``); elsewhere they are provisional and wait for a teacher. A note read
as worth nothing counts its 0 at once (the student may ask)."""
from __future__ import annotations

from coursework.config_annotation import catalogue
from coursework.config_annotation.parse import parse
from graders.config_annotation import core

CONFIG = ("zero_optimization:\n"
          "  stage: 2  # ZeRO-2 shards the optimizer states and the gradients; parameters stay whole on every card\n"
          "  overlap_comm: true  # 设成 true 就是关掉通信和计算的重叠\n")


def _checks(monkeypatch, trusted: str | None) -> dict:
    cfg = core.load_config()
    cfg["fields"]["confirm_full_marks"] = "untrusted"
    if trusted is None:
        monkeypatch.delenv(core.TRUSTED_ENV, raising=False)
    else:
        monkeypatch.setenv(core.TRUSTED_ENV, trusted)
    return {c.id: c for c in core.field_checks(parse(CONFIG, "ds.yaml"), "deepspeed", cfg, catalogue.load())}


def test_untrusted_fields_wait_and_trusted_ones_count(monkeypatch) -> None:
    checks = _checks(monkeypatch, None)
    stage = checks["field.zero_optimization.stage"]
    assert stage.points == 0 and stage.evidence["review"] == "pending" and stage.evidence["review_reason"] == "untrusted"
    assert stage.evidence["provisional_points"] > 0 and "not yet earned the teachers' trust" in stage.message["en"]
    assert "还没有赢得老师的信任" in stage.message["zh"]
    wrong = checks["field.zero_optimization.overlap_comm"]
    assert wrong.points == 0 and "review" not in wrong.evidence  # read as worth nothing: counted (0) at once
    counted = _checks(monkeypatch, '["deepspeed:zero_optimization.stage"]')["field.zero_optimization.stage"]
    assert counted.points > 0 and "review" not in counted.evidence


def test_the_worker_names_the_fields_whose_reading_earned_trust(app) -> None:
    from server.extensions import db
    from server.grading.task import _trusted_annotation_fields
    from server.quiz import labels

    with app.app_context():
        assert _trusted_annotation_fields() == "[]"
        item = labels.annotation_item("deepspeed", "zero_optimization.stage")
        for i in range(30):
            labels.record(item, f"note {i}", 1.0, {"rule": 1.0}, "group", None, None)
        db.session.commit()
        labels.forget()
        assert _trusted_annotation_fields() == '["deepspeed:zero_optimization.stage"]'


def test_the_shipped_assignment_holds_notes_whose_field_earned_no_trust(monkeypatch) -> None:
    """Issue 23: with no teacher's decisions yet, no note counts more than a teacher confirmed. The
    policy shipped in assignment.json is ``untrusted`` (it was ``none``: every note counted at once,
    27 wrong notes at full points on the blind set)."""
    monkeypatch.delenv(core.TRUSTED_ENV, raising=False)
    cfg = core.load_config()
    assert cfg["fields"]["confirm_full_marks"] == "untrusted"
    checks = core.field_checks(parse(CONFIG, "ds.yaml"), "deepspeed", cfg, catalogue.load())
    held = [c for c in checks if c.id.startswith("field.") and c.evidence.get("provisional_points")]
    assert held and all(c.points == 0 for c in held)
    assert sum(c.points for c in checks if c.id.startswith("field.")) == 0
