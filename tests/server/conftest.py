"""Fixtures for the web app's tests: a small placeholder assignment in a temp folder.

The placeholder is a real assignment folder, ``tests/fixtures/assignments/hello_ddp``
(assignment.json, bilingual README; its grader is ``tests/fixtures/hello_ddp_grader.py``), so the
pages, the upload rules and the worker run unchanged. Each test gets a copy in its tmp dir, reached
through ``DISTGRADE_ASSIGNMENTS_DIR`` (``coursework.settings`` reads it each time it is asked).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PLACEHOLDER = "hello_ddp"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def write_placeholder(root: Path) -> Path:
    """Copy ``tests/fixtures/assignments/hello_ddp`` to ``root/assignments/`` (tests may edit it there)."""
    folder = root / "assignments" / PLACEHOLDER
    shutil.copytree(FIXTURES / "assignments" / PLACEHOLDER, folder)
    return folder.parent


@pytest.fixture
def hw(app, tmp_path, monkeypatch):
    """The placeholder assignment published in the demo course; returns its CourseAssignment id."""
    from server.commands import DEMO_COURSE
    from server.extensions import db
    from server.models import CourseAssignment
    from server.roster import ensure_course

    adir = write_placeholder(tmp_path / "content")
    monkeypatch.setenv("DISTGRADE_ASSIGNMENTS_DIR", str(adir))
    with app.app_context():
        course = ensure_course(*DEMO_COURSE)
        db.session.commit()
        ca = db.session.scalar(db.select(CourseAssignment).where(
            CourseAssignment.course_id == course.id, CourseAssignment.assignment_id == PLACEHOLDER))
        return ca.id


SAMPLE_REPORT = {
    "assignment": PLACEHOLDER, "status": "graded", "score": 5.0, "max_score": 10.0,
    "checks": [
        {"id": "launch.ranks", "title": {"zh": "两个进程都启动了", "en": "Both ranks started"}, "status": "pass",
         "points": 4, "max_points": 4, "message": {"zh": "正常结束。", "en": "Exited cleanly."},
         "hint": {"zh": "", "en": ""}, "evidence": {"exit_codes": [0, 0]}},
        {"id": "speedup.ratio", "title": {"zh": "加速比", "en": "Speed-up"}, "status": "fail",
         "points": 1, "max_points": 6, "message": {"zh": "加速比太低。", "en": "Speed-up too low."},
         "hint": {"zh": "检查采样器。", "en": "Check the sampler."}, "evidence": {"speedup": 1.2}},
    ],
    "logs": {"rank0": "rank0 <done>", "rank1": "rank1 done"},
    "timings": {"total_s": 3.2}, "sandbox": {"layers": ["rlimits"]},
    "plots": {"throughput": {"1": 400.0, "2": 700.0}, "loss": {"run1": [2.0, 1.5, 1.0], "run2": [2.0, 1.2, 0.9]}},
    "summary": {"zh": "还差一点。", "en": "Almost there."}, "staff_traceback": None,
}


@pytest.fixture
def make_sub(app, hw):
    """Store a submission of the placeholder homework directly (no queue), in any state."""
    from server.extensions import db
    from server.models import Submission, User, utcnow

    def make(username: str = "alice", status: str = "graded", **fields):
        with app.app_context():
            user = db.session.scalar(db.select(User).where(User.username == username))
            data = fields.pop("content", b"print('hi')\n")
            now = utcnow()
            sub = Submission(user_id=user.id, course_id=1, assignment_id=PLACEHOLDER, status=status,
                             filename="train.py", content=data, sha256=Submission.digest(data), size=len(data),
                             started_at=now if status != "queued" else None,
                             finished_at=now if status in ("graded", "error") else None)
            if status == "graded":
                sub.score, sub.max_score, sub.report_json = 5.0, 10.0, SAMPLE_REPORT
            for k, v in fields.items():
                setattr(sub, k, v)
            db.session.add(sub)
            db.session.commit()
            return sub.id
    return make
