"""The regrade page in a real Chromium: regrading a submission that carries a teacher's
annotation decision asks first, and the summary counts the change in the counted score (it said
"0 scores changed" while the student's counted score fell)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.browser

SEED = """
from datetime import timedelta
from server import create_app
from server.scores.models import ManualCellScore
from server.extensions import db
from server.models import Course, Submission, User, utcnow
from tests.server.ui_seed import ddp_report

with create_app().app_context():
    uid = {u.username: u.id for u in db.session.scalars(db.select(User))}
    course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
    report = ddp_report()
    now, data = utcnow(), b"import torch\\n"
    sub = Submission(user_id=uid["alice"], course_id=course.id, assignment_id="ddp_speedup", status="graded",
                     mode="cpu", filename="train.py", content=data, sha256=Submission.digest(data), size=len(data),
                     started_at=now - timedelta(minutes=2), finished_at=now, score=report["score"], max_score=100.0,
                     report_json=report)
    db.session.add(sub)
    db.session.commit()
    db.session.add(ManualCellScore(submission_id=sub.id, cell_id="field.stage", score=2.86, max_points=5.0,
                                   comment="", graded_by=uid["teacher"]))
    db.session.commit()
    print(sub.id, report["score"])
"""

# What the worker does for the job: take the lease, store one report (the real code path).
STORE = """
import sys
from server import create_app
from server.grading.lifecycle import claim, store_report
from tests.server.ui_seed import ddp_report

with create_app().app_context():
    token = claim(int(sys.argv[1]))
    assert token is not None
    assert store_report(int(sys.argv[1]), token, ddp_report()) == "graded"
"""


def _run(service, code: str, *args: str) -> str:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=service.env, check=True,
                          capture_output=True, text=True).stdout


def test_regrade_asks_before_clearing_a_decision_and_counts_the_counted_score(service, browser) -> None:
    sid, score = _run(service, SEED).split()
    before, after = float(score) + 2.86, float(score)
    service.start_web()
    context = browser.new_context(locale="zh-CN")
    page = context.new_page()
    try:
        page.goto(f"{service.url}/login")
        page.fill("input[name=username]", "teacher")
        page.fill("input[name=password]", "teacher-pass")
        page.press("input[name=password]", "Enter")
        page.wait_for_load_state()
        page.goto(f"{service.url}/dashboard/DIST101/students/alice?lang=zh_CN")
        page.click(f"#sub-{sid} summary")
        page.click(f"#sub-{sid} .regrade-form button")
        page.wait_for_selector(".regrade-decided")  # asked first: the decision would be cleared
        assert "1 份提交带有你对注释的决定" in page.inner_text("main")
        page.check("input[name=clear_decisions]")
        page.click("form.dash-actions button.btn-primary")
        page.wait_for_selector("#regrade-live")
        _run(service, STORE, sid)
        for lang, said in (("zh_CN", "1 个分数有变化"), ("en", "1 score changed")):
            page.goto(page.url.split("?")[0] + f"?lang={lang}")
            live = page.inner_text("#regrade-live")
            assert said in live, live
            row = page.inner_text(f"#regrade-live tr:has(a:text-is('#{sid}'))")
            assert f"{before:g}" in row and f"{after:g}" in row, row
    finally:
        context.close()
