"""Fixtures for the web app's tests: a small placeholder assignment in a temp folder.

The placeholder is a real assignment folder (assignment.json, bilingual README, a
grader module) so the pages, the upload rules and the worker run unchanged; it only
lives in the test's tmp dir and is reached through ``DISTGRADE_ASSIGNMENTS_DIR``
(read by ``coursework.settings`` each time, in this process and in subprocesses alike).
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

PLACEHOLDER = "hello_ddp"
GRADER_MODULE = "distgrade_placeholder_grader"

GRADER_SOURCE = '''
"""Placeholder grader for the web tests: reports progress for a few seconds, then a full report."""
import os
import time

from coursework.progress import report_progress
from coursework.report import CheckResult, CheckStatus, GradeReport, text


def grade(assignment, job, files, mode):
    src = files[0].read_text(encoding="utf-8")
    logs = {"rank0": "", "rank1": ""}
    for step in range(int(os.environ.get("PLACEHOLDER_STEPS", "3"))):
        for rank in logs:
            logs[rank] += f"[rank{rank[-1]}] step {step} loss {1.0 / (step + 1):.3f}\\n"
        report_progress("training", logs)
        time.sleep(1.0)
    if "CRASH" in src:
        raise RuntimeError("placeholder grader crashed on purpose")
    report = GradeReport(assignment=assignment.id, logs=logs,
                         summary=text("两进程运行成功，但还不够快。", "Both ranks ran; not fast enough yet."))
    report.add(CheckResult("launch.ranks", text("两个进程都启动了", "Both ranks started"), CheckStatus.PASS,
                           4, 4, text("两个 rank 都正常结束。", "Both ranks exited cleanly."),
                           evidence={"exit_codes": [0, 0]}))
    report.add(CheckResult("speedup.ratio", text("加速比", "Speed-up"), CheckStatus.FAIL, 1, 6,
                           text("加速比 1.2x，低于 1.6x。", "Speed-up 1.2x is below 1.6x."),
                           text("检查 DistributedSampler。", "Check the DistributedSampler."),
                           evidence={"speedup": 1.2, "threshold": 1.6}))
    report.plots = {"throughput": {"1": 410.5, "2": 492.6},
                    "loss": {"1 rank": [2.3, 1.9, 1.5, 1.2], "2 ranks": [2.3, 1.8, 1.4, 1.1]}}
    report.sandbox = {"layers": ["rlimits", "no-network"], "cpus": 2}
    report.timings = {"total_s": 3.2}
    return report
'''


def write_placeholder(root: Path, *, attempts: int = 3, max_bytes: int = 4096) -> tuple[Path, Path]:
    """Create ``root/assignments/hello_ddp`` and ``root/pylib/<grader>.py``; returns both folders."""
    folder = root / "assignments" / PLACEHOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "assignment.json").write_text(json.dumps({
        "title": {"zh": "示例：两进程数据并行", "en": "Example: two-process data parallel"},
        "grader": f"{GRADER_MODULE}:grade", "resource": "cpu", "attempts": attempts,
        "upload": {"extensions": [".py"], "max_bytes": max_bytes},
    }, ensure_ascii=False), encoding="utf-8")
    (folder / "README.md").write_text(textwrap.dedent("""\
        # Two processes
        Launch with `torchrun --nproc_per_node=2 train.py` and use a **DistributedSampler**.
        - call `set_epoch` every epoch
        - log on rank 0 only
        """), encoding="utf-8")
    (folder / "README.zh.md").write_text(textwrap.dedent("""\
        # 两个进程
        用 `torchrun --nproc_per_node=2 train.py` 启动，并使用 **DistributedSampler**。
        - 每个 epoch 调用 `set_epoch`
        - 只在 rank 0 打日志
        """), encoding="utf-8")
    pylib = root / "pylib"
    pylib.mkdir(exist_ok=True)
    (pylib / f"{GRADER_MODULE}.py").write_text(GRADER_SOURCE, encoding="utf-8")
    return folder.parent, pylib


@pytest.fixture
def hw(app, tmp_path, monkeypatch):
    """The placeholder assignment published in the demo course; returns its CourseAssignment id."""
    from server.commands import DEMO_COURSE
    from server.extensions import db
    from server.models import CourseAssignment
    from server.roster import ensure_course

    adir, _ = write_placeholder(tmp_path / "content")
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
