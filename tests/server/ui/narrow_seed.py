"""What the narrow-screen and wording checks look at (``tests/server/ui/test_narrow_pages.py``,
``tests/server/test_page_words.py``), on top of ``tests.server.ui.pages_seed``:

* bob's third graded homework 1 upload, and his first one being regraded (queued again, its old
  score on show): the homework page must still count three attempts;
* alice's upload running, with a log for rank 0 and a silent rank 1;
* a homework 1 run the grader stopped early (25 steps of the 12 epochs configured), one chart only;
* alice's open practice attempt (started, nothing answered).

Run inside the service's environment: ``python -m tests.server.ui.narrow_seed`` (prints the ids as JSON).
"""
from __future__ import annotations

import json

from tests.server.ui.pages_seed import _store, seed_pages
from tests.server.ui_seed import ddp_report


def stopped_report() -> dict:
    """Homework 1 stopped by the grader after 25 optimizer steps; the configured count was 12 epochs."""
    report = ddp_report()
    report["timings"]["epochs"] = 12
    report["plots"] = {"throughput": report["plots"]["throughput"]}  # one chart, alone in its row
    for c in report["checks"]:
        if c["id"] == "run.distributed":
            c["evidence"] = {**c.get("evidence", {}), "stopped": True, "steps": 25}
    return report


def seed_narrow() -> dict:
    """Everything ``seed_pages`` stores and the cases above; returns their ids."""
    from coursework.quiz.bank import load_quiz
    from server.scores.actions import regrade
    from server.extensions import db
    from server.models import Course, Submission, User
    from server.quiz import attempts

    ids = seed_pages()
    course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
    users = {u.username: u for u in db.session.scalars(db.select(User))}
    ids["third"] = _store(course, users["bob"], "ddp_speedup", ddp_report()).id
    regrade([db.session.get(Submission, ids["bob"])], users["teacher"].id)
    running = _store(course, users["alice"], "ddp_speedup", {"max_score": 100.0}, status="running")
    running.progress_json = {"phase": "run.distributed",
                             "logs": {"n2.rank0": "epoch 0 step 10 loss 2.10\n", "n2.rank1": ""}}
    db.session.commit()
    ids["running"] = running.id
    ids["stopped"] = _store(course, users["alice"], "ddp_speedup", stopped_report()).id
    practice = attempts.start_attempt(load_quiz("ch7_3_selftest"), users["alice"].id, course.id)
    db.session.commit()
    ids["practice_open"] = practice.id
    return ids


if __name__ == "__main__":
    from server import create_app

    with create_app().app_context():
        print(json.dumps(seed_narrow()))
