"""More of what students and teachers read, for the page checks in ``tests/server/ui/``:
on top of ``tests.server.ui_seed`` it stores a homework 1 report with the speed check's real
evidence keys, a homework 2 config report from the real core (long field paths), a notebook
report with manual cells waiting for a teacher and a kernel log, a submission under integrity
review, a replaced upload, an integrity decision in the audit log, and bob's graded quiz attempt
answered through the real grading code (choice answers, a numeric one).

Run inside the service's environment: ``python -m tests.server.ui.pages_seed`` (prints the ids as JSON).
"""
from __future__ import annotations

import copy
import json
from datetime import timedelta

from tests.server.ui_seed import GIB, ddp_report, fsdp_report, seed

# Field paths as long as the real DeepSpeed and Accelerate configs have them.
CONFIG = """{
  // 全局 batch = 每卡 micro-batch × 梯度累积步数 × GPU 数
  "train_batch_size": 64,
  "gradient_accumulation_steps": 4,
  "zero_optimization": {
    // ZeRO-3：参数、梯度和优化器状态都切分到各卡
    "stage": 3,
    // 把优化器状态卸载到 CPU 内存，省显存但更慢
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    // stage3_gather_16bit_weights_on_model_save: save a full 16-bit copy at the end
    "stage3_gather_16bit_weights_on_model_save": true,
    "stage3_max_live_parameters": 1000000000
  }
}
"""


def speed_report() -> dict:
    """Homework 1 with the speed check failing the way the real grader words its evidence."""
    report = ddp_report()
    for c in report["checks"]:
        if c["id"] == "speedup":
            c["status"], c["points"] = "fail", 0.0
            c["evidence"] = {"throughput_1": 1670.24, "throughput_n": 2410.5, "loop_1": 1702.1, "loop_n": 2466.0,
                             "unique_fraction": 1.0, "expected_gpu": "1.6-1.9x", "raw": 1.443, "idle_1": 0.041,
                             "reference": 1.62, "ref_t1": 1650.2, "ref_tn": 2673.3, "ratio_1": 1.012,
                             "ratio_n": 0.902, "normalised_uncapped": 0.891, "normalised": 0.891, "band": "slow",
                             "load_dependent": True, "reference_at": 1764754200.5}
        if c["id"] == "sampler.coverage":
            c["evidence"] = {"allowed_missing": 64, "dataset_len": 50000, "missing": 0}
    return report


def card_report() -> dict:
    """Homework 3 against the card the grader really simulates on a CPU host (15 GiB scaled to
    ``small``: 160 MiB), labelled as the grader labels it."""
    report = fsdp_report()
    mem = report["plots"]["memory"]
    mem["capacity"] = 15 * GIB * 12232704 / 1174470656
    mem["card"] = "T4 (15 GiB, scaled to small)"
    for r in mem["ranks"]:
        r["peak"] = 0.146 * GIB
    return report


def config_report() -> dict:
    """Homework 2's config route, graded by the real core."""
    from coursework.report import GradeReport
    from graders.config_annotation import core

    r = GradeReport(assignment="config_annotation")
    for c in core.grade_config_text(CONFIG, "ds_config.json"):
        r.add(c)
    return r.to_dict()


def notebook_report() -> dict:
    """Homework 2's notebook route after the autograder: two manual cells wait for the teacher."""
    from coursework.assignments import load

    cfg = load("config_annotation").raw["checks"]
    man = cfg["manual"]
    checks = [{"id": "notebook.execute", "title": cfg["notebook.execute"]["title"], "status": "pass", "points": 0.0,
               "max_points": 0.0, "message": {"zh": "笔记本运行完毕。", "en": "The notebook ran."},
               "hint": {"zh": "", "en": ""}, "evidence": {}}]
    for cell, pts in (("explain_zero3", 5.0), ("explain_offload", 5.0)):
        checks.append({"id": f"manual.{cell}", "title": {k: v.format(cell=cell) for k, v in man["title"].items()},
                       "status": "skip", "points": 0.0, "max_points": pts,
                       "message": {k: v.format(max=pts) for k, v in man["messages"]["pending"].items()},
                       "hint": {"zh": "", "en": ""},
                       "evidence": {"manual_cells": [{"cell_id": cell, "max_points": pts}]}})
    return {"assignment": "config_annotation", "status": "graded", "score": 0.0, "max_score": 10.0,
            "checks": checks, "summary": {"zh": "自动评分完成，等待老师批改。", "en": "Autograded; waiting for the teacher."},
            "logs": {"kernel": "[NbConvertApp] Executing notebook with kernel: python3\n"},
            "plots": {"manual_cells": [{"cell_id": "explain_zero3", "max_points": 5.0},
                                       {"cell_id": "explain_offload", "max_points": 5.0}]},
            "timings": {"total_s": 12.5}, "sandbox": {"layers": ["bwrap"]}}


def held_report() -> dict:
    """Homework 1 held for an integrity review, with events whose details are long."""
    report = ddp_report()
    report.update(status="needs_review", score=0.0,
                  integrity={"computed_score": 62.5, "events": [
                      {"source": "harness", "kind": "torch.distributed.all_reduce.__wrapped__", "rank": 1, "run": "n2",
                       "detail": "train.py:41 replaced torch.distributed.all_reduce.__wrapped__ with "
                                 "_fast_path_that_skips_communication_entirely_for_benchmarking"},
                      {"source": "static", "kind": "scan", "rank": None,
                       "detail": "train.py:7: import gc; gc.get_objects() # collect_every_tensor_in_the_process"}]})
    return report


def _store(course, user, aid: str, report: dict, status: str = "graded", **extra):
    from server.extensions import db
    from server.models import Submission, utcnow

    now = utcnow()
    data = b"import torch\n"
    sub = Submission(user_id=user.id, course_id=course.id, assignment_id=aid, status=status, mode="cpu",
                     filename="train.py" if aid != "config_annotation" else "ds_config.json", content=data,
                     sha256=Submission.digest(data), size=len(data), created_at=now - timedelta(minutes=7),
                     enqueued_at=now - timedelta(minutes=7), started_at=now - timedelta(minutes=6),
                     finished_at=now - timedelta(minutes=5) if status == "graded" else None,
                     score=report.get("score") if status == "graded" else None,
                     max_score=report.get("max_score"), report_json=report if status == "graded" else None, **extra)
    db.session.add(sub)
    db.session.commit()
    return sub


def _quiz(course, bob) -> int:
    """bob's graded attempt, every question answered through the real grading code: choice answers,
    a written answer fully right (the reference answer), one the rubric was unsure of (waiting for
    the teacher) and other written answers."""
    from coursework.quiz.bank import load_quiz
    from server.extensions import db
    from server.quiz import attempts
    from server.quiz.models import QuizAnswer

    from coursework.quiz.bank import load_question
    from tests.server.quiz.trust_helpers import earn_trust

    quiz = load_quiz("ch7_3_graded")
    for qid in quiz.question_ids:  # graded written verdicts count (and may be asked about) once trust is earned
        if load_question(qid).type == "text":
            earn_trust(qid)
    att = attempts.start_attempt(quiz, bob.id, course.id)
    db.session.commit()
    texts = 0
    for qid in att.question_ids:
        variant = attempts.variant_for(att, qid)
        q = variant.question
        if q.type in ("single", "multiple"):
            ids = [o["id"] for o in q.info["options"]]
            raw = ",".join(ids[:2]) if q.type == "multiple" else ids[-1]
        elif q.type == "numeric":
            raw = "16"
        else:
            texts += 1
            raw = variant.reference_text("zh") if texts == 1 else "每张卡只看自己那份数据，梯度在反向传播时平均。"
        try:
            out = attempts.answer_question(att, qid, raw, "zh", variant)
        except Exception:  # a format error stores nothing: the question stays unanswered
            out = None
        db.session.commit()
        if texts == 2 and q.type == "text" and out is not None and out.answer is not None:
            # what the rubric stores when it is unsure: nothing counted, a teacher decides
            db.session.execute(db.update(QuizAnswer).where(QuizAnswer.id == out.answer["id"]).values(
                review_state="pending", score=0.0, correct=False))
            db.session.commit()
    attempts.finish_attempt(att)
    return att.id


def seed_pages() -> dict:
    """Everything ``seed`` stores, and the cases above; returns their ids."""
    from server.dashboard.integrity import decide
    from server.extensions import db
    from server.models import Course, Submission, User

    ids = seed()
    course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
    users = {u.username: u for u in db.session.scalars(db.select(User))}
    alice, bob, carol = users["alice"], users["bob"], users["carol"]
    ids["speed"] = _store(course, bob, "ddp_speedup", speed_report()).id
    ids["fsdp_card"] = _store(course, bob, "fsdp_fit", card_report()).id
    ids["config"] = _store(course, alice, "config_annotation", config_report()).id
    ids["notebook"] = _store(course, bob, "config_annotation", notebook_report()).id
    held = _store(course, carol, "ddp_speedup", held_report(), review_status="pending", computed_score=62.5)
    ids["held"] = held.id
    decided = _store(course, bob, "fsdp_fit", copy.deepcopy(held_report()), review_status="pending",
                     computed_score=62.5)
    decide(decided, "accept", "gc used for a leak hunt", users["teacher"].id, decided.grading_runs)
    old = _store(course, carol, "fsdp_fit", {"max_score": 100.0}, status="queued")
    new = _store(course, carol, "fsdp_fit", {"max_score": 100.0}, status="queued")
    db.session.execute(db.update(Submission).where(Submission.id == old.id).values(status="replaced",
                                                                                   replaced_by=new.id))
    db.session.commit()
    ids["replaced"], ids["waiting"] = old.id, new.id
    ids["quiz_attempt"] = _quiz(course, bob)
    return ids


if __name__ == "__main__":
    from server import create_app

    with create_app().app_context():
        print(json.dumps(seed_pages()))
