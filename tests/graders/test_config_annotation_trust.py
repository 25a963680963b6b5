"""Homework 2 under ``fields.confirm_full_marks: untrusted``: a note's points count at once
only on fields whose reading earned trust from teachers' decisions (named by the worker in
``DISTGRADE_TRUSTED_READINGS``); elsewhere they are provisional and wait for a teacher.
The same holds in the other direction. A note read as worth nothing (or part) counts at once only
where the reading earned trust for verdicts of that kind; elsewhere the student is told the reading
*suggests* the note may be wrong, and a teacher confirms."""
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
    counted = _checks(monkeypatch, '["deepspeed:zero_optimization.stage:full"]')["field.zero_optimization.stage"]
    assert counted.points > 0 and "review" not in counted.evidence


def test_a_zero_waits_too_unless_the_reading_earned_trust_for_zeros(monkeypatch) -> None:
    """The overlap_comm note is read as contradicting its value: without trust for zeros on that
    field it is provisional, said as a suggestion ("may be wrong"), never a final "is wrong"."""
    wrong = _checks(monkeypatch, None)["field.zero_optimization.overlap_comm"]
    assert wrong.points == 0 and wrong.evidence["review"] == "pending" and wrong.evidence["provisional_points"] == 0
    assert wrong.evidence["review_reason"] == "untrusted" and wrong.evidence["verdict"] == "contradiction"
    assert "may be wrong about" in wrong.message["en"] and "is wrong" not in wrong.message["en"]
    assert "可能有误" in wrong.message["zh"] and "不符" not in wrong.message["zh"]
    assert "may be wrong about" in wrong.evidence["reading"]["en"]
    # trust for full marks on the field says nothing about its zeros
    full_only = _checks(monkeypatch, '["deepspeed:zero_optimization.overlap_comm:full"]')
    assert full_only["field.zero_optimization.overlap_comm"].evidence.get("review") == "pending"
    zeros = _checks(monkeypatch, '["deepspeed:zero_optimization.overlap_comm:zero"]')["field.zero_optimization.overlap_comm"]
    assert zeros.points == 0 and "review" not in zeros.evidence and "wrong" in zeros.message["en"]


def test_an_empty_note_is_no_reading_and_counts_its_zero(monkeypatch) -> None:
    """No note at all is not a reader's guess: it stays a counted 0 (nothing to confirm)."""
    cfg = core.load_config()
    monkeypatch.delenv(core.TRUSTED_ENV, raising=False)
    checks = {c.id: c for c in core.field_checks(parse("zero_optimization:\n  stage: 2\n", "ds.yaml"), "deepspeed",
                                                 cfg, catalogue.load())}
    stage = checks["field.zero_optimization.stage"]
    assert stage.points == 0 and "review" not in stage.evidence and stage.evidence["verdict"] == "missing"


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
        assert _trusted_annotation_fields() == '["deepspeed:zero_optimization.stage:full"]'  # full only
        for i in range(30):  # thirty zeros the teachers confirmed, one right note failed: no trust in zeros
            labels.record(item, f"bad note {i}", 0.0, {"rule": 0.0}, "group", None, None)
        labels.record(item, "a right note the reading failed", 1.0, {"rule": 0.0}, "group", None, None)
        db.session.commit()
        labels.forget()
        assert _trusted_annotation_fields() == '["deepspeed:zero_optimization.stage:full"]'


def test_the_shipped_assignment_holds_notes_whose_field_earned_no_trust(monkeypatch) -> None:
    """With no teacher's decisions yet, no note counts more than a teacher confirmed. The
    policy shipped in assignment.json is ``untrusted`` (it was ``none``: every note counted at once,
    27 wrong notes at full points on the blind set)."""
    monkeypatch.delenv(core.TRUSTED_ENV, raising=False)
    cfg = core.load_config()
    assert cfg["fields"]["confirm_full_marks"] == "untrusted"
    checks = core.field_checks(parse(CONFIG, "ds.yaml"), "deepspeed", cfg, catalogue.load())
    held = [c for c in checks if c.id.startswith("field.") and c.evidence.get("provisional_points")]
    assert held and all(c.points == 0 for c in held)
    assert sum(c.points for c in checks if c.id.startswith("field.")) == 0
