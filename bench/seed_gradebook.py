"""Generate a synthetic class for the gradebook benchmark: N students x 12 items.

A course of its own (BENCH, taught by the demo teacher) with nine homework (one "last" policy, deadlines with a late penalty, a few extensions) with one to
three graded submissions per student plus some errors and pending ones, and three quizzes
with one to three finished attempts; a sprinkling of overrides and manual cell scores, so
every path of the gradebook runs. Rows go in with bulk inserts; nothing is committed to the repo.

Run: ``.venv/bin/python -m bench.seed_gradebook --students 2000 --db /tmp/gb.db [--reports]``.
"""
from __future__ import annotations

import argparse
import random
import time
from datetime import datetime, timedelta

from sqlalchemy import insert
from werkzeug.security import generate_password_hash

HOMEWORK = [f"bench_hw{i:02d}" for i in range(1, 10)]
QUIZZES = ["ch7_3_graded", "ch7_3_practice", "ch7_3_selftest"]
DEADLINE = datetime(2026, 11, 1, 12, 0)


CHECKS = {"sampler.disjoint": 0.15, "sampler.reshuffle": 0.38, "ddp.grad_sync": 0.1, "ddp.syncbn": 0.2,
          "memory.fit": 0.25}  # check id -> share of the class failing it


MANUAL_CELLS = [{"cell_id": "q1", "max_points": 5,
                 "source": "# stage 3 shards parameters, gradients and optimizer states across ranks"}]


def fake_report(rng: random.Random, score: float, manual: bool = False) -> dict:
    """A small GradeReport dict with the DDP/FSDP check ids, a speed-up and per-rank peaks.

    ``manual``: one check lists a free-text cell for a person to grade (``evidence.manual_cells``).
    """
    checks = [{"id": cid, "title": {"zh": cid, "en": cid}, "status": "fail" if rng.random() < share else "pass",
               "points": 0, "max_points": 0, "evidence": {}} for cid, share in CHECKS.items()]
    if manual:
        checks.append({"id": "notebook.manual", "title": {"zh": "人工评分", "en": "Graded by hand"}, "status": "info",
                       "points": 0, "max_points": 5, "evidence": {"manual_cells": MANUAL_CELLS}})
    t1 = rng.uniform(300, 500)
    peaks = [rng.uniform(3, 9) * 2 ** 30 for _ in range(2)]
    return {"assignment": "bench", "status": "graded", "score": score, "max_score": 100.0, "checks": checks,
            "logs": {"rank0": "epoch 0 loss 2.1\nepoch 1 loss 1.4\n", "rank1": "epoch 0 loss 2.1\n"},
            "plots": {"throughput": {"nproc": [1, 2], "samples_per_s": [t1, t1 * rng.uniform(0.9, 1.95)]},
                      "memory": {"ranks": [{"rank": r, "peak": p} for r, p in enumerate(peaks)]}},
            "summary": {"zh": "合成报告", "en": "synthetic report"}}


def seed_class(students: int, seed: int = 7, code: str = "BENCH", reports: bool = False) -> dict[str, int]:
    """Fill the bound database (inside an app context) with ``students`` students; returns row counts.

    ``reports`` also attaches synthetic reports and quiz answers (for the statistics pages).
    """
    from server.scores.models import Extension, ManualCellScore, ScoreOverride
    from server.extensions import db
    from server.models import Course, CourseAssignment, Membership, Submission, User
    from server.quiz.models import QuizAttempt
    from server.models import Role
    from server.roster import enrol

    rng = random.Random(seed)
    course = Course(code=code, title="Benchmark class")
    db.session.add(course)
    db.session.commit()
    teacher_user, _ = enrol(course, "teacher", role=Role.INSTRUCTOR, password="teacher-pass")
    teacher_user.set_password("teacher-pass")  # seed-demo made the demo teacher with a random one
    db.session.commit()
    teacher = teacher_user.id
    settings = []
    for i, aid in enumerate(HOMEWORK):
        ca = CourseAssignment(course_id=course.id, assignment_id=aid, deadline=DEADLINE + timedelta(days=7 * i),
                              attempt_limit=5, late_penalty_per_day=0.1, score_policy="last" if i == 4 else "best")
        db.session.add(ca)
        settings.append(ca)
    db.session.commit()
    pw = generate_password_hash("not-a-real-password", method="pbkdf2:sha256:1")
    first = (db.session.scalar(db.select(db.func.max(User.id))) or 0) + 1
    db.session.execute(insert(User), [{"id": first + n, "username": f"stu{n:05d}", "display_name": f"Student {n}",
                                       "email": f"stu{n:05d}@example.edu", "password_hash": pw,
                                       "created_at": DEADLINE} for n in range(students)])
    uids = list(range(first, first + students))
    db.session.execute(insert(Membership), [{"user_id": u, "course_id": course.id, "role": "student"} for u in uids])
    subs, attempts, manual_for = [], [], []
    for u in uids:
        for ca in settings:
            if rng.random() < 0.08:
                continue  # never submitted: "behind"
            for k in range(rng.choice((1, 1, 2, 3))):
                late = rng.random() < 0.1
                created = ca.deadline + (timedelta(hours=rng.randint(1, 60)) if late else -timedelta(hours=rng.randint(1, 200)))
                status = "graded" if rng.random() > 0.03 else rng.choice(("error", "queued"))
                subs.append({"user_id": u, "course_id": course.id, "assignment_id": ca.assignment_id,
                             "status": status, "mode": "cpu", "resource": "cpu", "filename": "train.py",
                             "content": b"x", "sha256": "0" * 64, "size": 1, "created_at": created,
                             "score": round(rng.uniform(20, 100), 1) if status == "graded" else None,
                             "max_score": 100.0, "enqueue_gen": 0, "infra_retries": 0, "grading_runs": 1,
                             "results_stored": 1})
                if reports and status == "graded":
                    subs[-1]["report_json"] = fake_report(rng, subs[-1]["score"], ca.assignment_id == HOMEWORK[2])
        for q in QUIZZES:
            for n in range(1, rng.choice((0, 1, 2, 3)) + 1):
                attempts.append({"user_id": u, "course_id": course.id, "quiz_id": q, "attempt_no": n,
                                 "mode": "graded", "status": "submitted", "question_ids": [],
                                 "started_at": DEADLINE, "score": float(rng.randint(0, 10)), "max_score": 10.0})
    for chunk in range(0, len(subs), 5000):
        db.session.execute(insert(Submission), subs[chunk:chunk + 5000])
    for chunk in range(0, len(attempts), 5000):
        db.session.execute(insert(QuizAttempt), attempts[chunk:chunk + 5000])
    if reports:
        _answers(rng, course.id)
    picked = rng.sample(uids, max(1, students // 50))
    db.session.execute(insert(Extension), [{"course_assignment_id": settings[0].id, "user_id": u,
                                            "deadline": DEADLINE + timedelta(days=3), "reason": "bench",
                                            "granted_by": teacher, "granted_at": DEADLINE} for u in picked])
    db.session.execute(insert(ScoreOverride), [{"course_id": course.id, "user_id": u, "item": f"hw:{HOMEWORK[1]}",
                                                "score": 90.0, "reason": "bench", "set_by": teacher,
                                                "set_at": DEADLINE} for u in picked])
    manual_for = db.session.scalars(db.select(Submission.id).where(
        Submission.course_id == course.id, Submission.assignment_id == HOMEWORK[2],
        Submission.status == "graded").order_by(Submission.id).limit(students // 10)).all()
    if manual_for:
        db.session.execute(insert(ManualCellScore), [{"submission_id": s, "cell_id": "q1", "score": 2.0,
                                                      "max_points": 5.0, "comment": "", "graded_by": teacher,
                                                      "graded_at": DEADLINE} for s in manual_for])
    db.session.commit()
    return {"students": students, "submissions": len(subs), "quiz_attempts": len(attempts),
            "course_id": db.session.scalar(db.select(Course.id).where(Course.code == code))}


def _answers(rng: random.Random, course_id: int) -> None:
    """Answers for every attempt at the graded quiz: stronger attempts answer better."""
    from coursework.quiz.bank import load_question, load_quiz
    from server.extensions import db
    from server.quiz.models import QuizAnswer, QuizAttempt

    quiz = load_quiz("ch7_3_graded")
    questions = [load_question(q) for q in quiz.question_ids]
    rows = []
    for att_id, uid, score in db.session.execute(db.select(QuizAttempt.id, QuizAttempt.user_id, QuizAttempt.score)
                                                 .where(QuizAttempt.course_id == course_id,
                                                        QuizAttempt.quiz_id == quiz.id)
                                                 .order_by(QuizAttempt.id)):
        for pos, q in enumerate(questions):
            right = rng.random() < 0.2 + 0.07 * score
            options = [o["id"] for o in q.info.get("options") or []]
            if q.type == "text":
                details = {"missing": [] if right else rng.sample(["no_sampler", "full_data", "why"], 1)}
            elif options:
                details = {"chosen": options[:1] if right else rng.sample(options, min(len(options), rng.choice((1, 2))))}
            else:
                details = {"mistake": None if right else rng.choice(["gb_vs_gib", "per_card"])}
            rows.append({"attempt_id": att_id, "user_id": uid, "quiz_id": quiz.id, "question_id": q.id,
                         "position": pos, "seed": 1, "lang": "zh", "raw_answer": "42" if right else "7",
                         "score": q.points if right else 0.0, "max_score": q.points, "fraction": 1.0 if right else 0.0,
                         "correct": right, "format_errors": 0, "details_json": details, "feedback_json": [],
                         "created_at": DEADLINE})
    if rows:
        db.session.execute(insert(QuizAnswer), rows)


def make_app(db_path: str):
    """A migrated app on ``db_path`` with the demo course and instructor."""
    from flask_migrate import upgrade

    from server import create_app

    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{db_path}", "WTF_CSRF_ENABLED": False,
                      "SECRET_KEY": "bench-only-secret-key-0123456789", "REDIS_URL": ""})
    with app.app_context():
        upgrade()
        app.test_cli_runner().invoke(args=["seed-demo"])
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=2000)
    parser.add_argument("--db", help="SQLite file to create; default: the app's DATABASE_URL, already migrated")
    parser.add_argument("--reports", action="store_true", help="attach synthetic reports and quiz answers")
    args = parser.parse_args()
    if args.db:
        app = make_app(args.db)
    else:
        from server import create_app
        app = create_app()
    t0 = time.perf_counter()
    with app.app_context():
        counts = seed_class(args.students, reports=args.reports)
    print(f"seeded {counts} in {time.perf_counter() - t0:.1f}s into {args.db}")


if __name__ == "__main__":
    main()
