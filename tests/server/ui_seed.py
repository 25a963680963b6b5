"""Seed the demo course with what the UI tests look at: graded homework 1 and 3 reports shaped like
the real graders' (evidence, plots, timings, sandbox layers), a syntax-error submission, an
instructor's override with its reason, a practice quiz attempt and a graded one.

Run inside the service's environment: ``python -m tests.server.ui_seed`` (prints the ids as JSON).
"""
from __future__ import annotations

import json
from datetime import timedelta

from coursework.assignments import load

GIB = 2 ** 30
SYNTAX_TB = '''Traceback (most recent call last):
  File "/usr/lib/python3.11/runpy.py", line 198, in _run_module_as_main
    return _run_code(code, main_globals, None,
  File "/opt/distgrade/graders/harness/distgrade_harness/launch.py", line 40, in main
    exec(compile(source, path, "exec"), ns)
  File "/var/tmp/distgrade-job-81/work/train.py", line 2
    model = = Net()
            ^
SyntaxError: invalid syntax
'''


def _checks(assignment_id: str, failing: dict[str, dict]) -> list[dict]:
    cfg = load(assignment_id).raw["checks"]
    out = []
    for cid, spec in cfg.items():
        pts = float(spec.get("points") or 0)
        bad = cid in failing
        out.append({"id": cid, "title": spec["title"], "status": "fail" if bad else "pass",
                    "points": 0.0 if bad else pts, "max_points": pts,
                    "message": {"zh": "见证据。", "en": "See the evidence."} if bad else {"zh": "通过。", "en": "Passed."},
                    "hint": {"zh": "", "en": ""}, "evidence": failing.get(cid, {"wall_s": 3.21})})
    return out


def ddp_report() -> dict:
    checks = _checks("ddp_speedup", {
        "sampler.disjoint": {"overlap": 512, "digests": {"0": "ab12cd34ef56ab12", "1": "ab12cd34ef56ab12"}},
        "speedup": {"throughput_1": 1670.24, "throughput_n": 1187.13, "raw": 0.711, "band": "slow",
                    "reference": {"speedup": 1.42, "measured_at": 1764754200.5, "solution": "deadbeefcafe0123"},
                    "unique_fraction": 0.5}})
    score = sum(c["points"] for c in checks)
    loss = [round(2.3 * 0.8 ** i, 4) for i in range(24)]
    return {"assignment": "ddp_speedup", "status": "graded", "score": score, "max_score": 100.0, "checks": checks,
            "summary": {"zh": f"得分 {score:g}/100。需要处理：sampler.disjoint, speedup。",
                        "en": f"Score {score:g}/100. To fix: sampler.disjoint, speedup."},
            "plots": {"throughput": {"nproc": [1, 2], "samples_per_s": [1670.24, 1187.13]},
                      "loss": {"n1.rank0": loss, "n2.rank0": loss[::2], "n2.rank1": [x * 1.02 for x in loss[::2]]}},
            "logs": {"n1.rank0": "epoch 0 loss 2.30\nepoch 1 loss 1.47\n", "n2.rank0": "epoch 0 loss 2.31\n"},
            "timings": {"total_s": 41.25, "epochs": 2, "run_n1_s": 12.0, "run_n2_s": 18.31},
            "sandbox": {"layers": ["bwrap", "cgroup-memory", "no-network"]}}


def syntax_report() -> dict:
    checks = _checks("ddp_speedup", {"run.single": {"exception": {
        "exc_type": "SyntaxError", "message": "invalid syntax (train.py, line 2)", "line": None, "code": "",
        "traceback": SYNTAX_TB}}})
    for c in checks:
        if c["id"] != "run.single":
            c.update(status="fail", points=0.0, evidence={})
    checks[0]["message"] = {"zh": "单进程运行中 rank 0 抛出 SyntaxError：invalid syntax（train.py 第 None 行：）。",
                            "en": "In the 1-process run, rank 0 raised SyntaxError: invalid syntax (train.py line None: )."}
    return {"assignment": "ddp_speedup", "status": "graded", "score": 0.0, "max_score": 100.0, "checks": checks,
            "summary": {"zh": "得分 0/100。需要处理：run.single。", "en": "Score 0/100. To fix: run.single."},
            "logs": {"n1.rank0": SYNTAX_TB}, "timings": {"total_s": 4.0, "run_n1_s": 2.1},
            "sandbox": {"layers": ["bwrap"]}}


def fsdp_report() -> dict:
    checks = _checks("fsdp_fit", {"memory.fit": {"peak": 0.171 * GIB, "capacity": 0.16 * GIB}})
    score = sum(c["points"] for c in checks)
    mem = {"unit": "bytes", "size": "small", "capacity": 0.16 * GIB, "card": "T4 (15 GiB, scaled to small)",
           "mirror": {"size": "1b", "params": 1174470656, "capacity": 15 * GIB, "scale": 0.0104},
           "ranks": [{"rank": r, "params": 0.02 * GIB, "grads": 0.02 * GIB, "optimizer": 0.04 * GIB, "other": 0.01 * GIB,
                      "peak": (0.171 + 0.002 * r) * GIB, "step": 3} for r in range(2)],
           "baseline": {"nproc": 1, "ranks": [{"rank": 0, "peak": 0.26 * GIB}]},
           "estimates": [{"stage": s, "label": {"zh": f"ZeRO-{s}", "en": f"ZeRO-{s}"}, "total": (0.2 - 0.04 * s) * GIB,
                          "fits": s >= 2} for s in range(4)]}
    return {"assignment": "fsdp_fit", "status": "graded", "score": score, "max_score": 100.0, "checks": checks,
            "summary": {"zh": f"得分 {score:g}/100。需要处理：memory.fit。", "en": f"Score {score:g}/100. To fix: memory.fit."},
            "plots": {"memory": mem, "loss": {"rank0": [3.1, 2.5, 2.2, 2.0], "rank1": [3.1, 2.6, 2.2, 2.1]}},
            "timings": {"total_s": 30.0, "steps": 6, "run_n2_s": 14.0, "run_n1_s": 9.0},
            "sandbox": {"layers": ["bwrap"]}}


def seed() -> dict:
    from server.scores.actions import set_override
    from server.extensions import db
    from server.models import Course, Submission, User, utcnow
    from server.quiz.models import QuizAttempt

    from server.roster import enrol

    course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
    enrol(course, "carol", password="carol-pass")  # a student with nothing yet
    db.session.commit()
    uid = {u.username: u.id for u in db.session.scalars(db.select(User))}
    now = utcnow()
    ids = {}
    for name, user, aid, report, score in [
            ("good", "alice", "ddp_speedup", ddp_report(), None), ("syntax", "alice", "ddp_speedup", syntax_report(), 0.0),
            ("fsdp", "alice", "fsdp_fit", fsdp_report(), None), ("bob", "bob", "ddp_speedup", ddp_report(), None)]:
        data = b"import torch\nmodel = = Net()\n" if name == "syntax" else b"import torch\n"
        sub = Submission(user_id=uid[user], course_id=course.id, assignment_id=aid, status="graded", mode="cpu",
                         filename="train.py", content=data, sha256=Submission.digest(data), size=len(data),
                         created_at=now - timedelta(minutes=10), enqueued_at=now - timedelta(minutes=10),
                         started_at=now - timedelta(minutes=9), finished_at=now - timedelta(minutes=8),
                         score=report["score"] if score is None else score, max_score=100.0, report_json=report)
        db.session.add(sub)
        db.session.commit()
        ids[name] = sub.id
    set_override(course.id, uid["alice"], "hw:ddp_speedup", 85, "late-day waiver after the cluster outage",
                 uid["teacher"], None, top=100)
    db.session.add(QuizAttempt(user_id=uid["alice"], course_id=course.id, quiz_id="ch7_3_selftest", attempt_no=1,
                               mode="practice", status="submitted", question_ids=[], score=3.75, max_score=6.0))
    db.session.add(QuizAttempt(user_id=uid["alice"], course_id=course.id, quiz_id="ch7_3_graded", attempt_no=1,
                               mode="graded", status="submitted", question_ids=[], score=7.0, max_score=10.0))
    db.session.commit()
    return ids


if __name__ == "__main__":
    from server import create_app

    with create_app().app_context():
        print(json.dumps(seed()))
