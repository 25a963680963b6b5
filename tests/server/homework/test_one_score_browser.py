"""A report page says one score: the headline counted the teacher's hand-given points
("72.72 / 100") while the grader's summary below still said "得分 62.86 / 100"."""
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
    report["score"] = 62.86
    report["summary"] = {"zh": "得分 62.86/100。需要处理：speedup。", "en": "Score 62.86/100. To fix: speedup."}
    now, data = utcnow(), b"import torch\\n"
    sub = Submission(user_id=uid["alice"], course_id=course.id, assignment_id="ddp_speedup", status="graded",
                     mode="cpu", filename="train.py", content=data, sha256=Submission.digest(data), size=len(data),
                     started_at=now - timedelta(minutes=2), finished_at=now, score=62.86, max_score=100.0,
                     report_json=report)
    db.session.add(sub)
    db.session.commit()
    db.session.add(ManualCellScore(submission_id=sub.id, cell_id="manual.notes", score=9.86, max_points=10.0,
                                   comment="", graded_by=uid["teacher"]))
    db.session.commit()
    print(sub.id)
"""


def test_the_report_page_says_one_score_in_both_languages(service, browser) -> None:
    sid = int(subprocess.run([sys.executable, "-c", SEED], cwd=REPO, env=service.env, check=True,
                             capture_output=True, text=True).stdout.split()[-1])
    service.start_web()
    for lang, locale, word in (("zh_CN", "zh-CN", "需要处理"), ("en", "en-US", "To fix")):
        context = browser.new_context(locale=locale)
        page = context.new_page()
        try:
            page.goto(f"{service.url}/login")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", "alice-pass")
            page.press("input[name=password]", "Enter")
            page.wait_for_load_state()
            page.goto(f"{service.url}/submissions/{sid}?lang={lang}")
            card = page.inner_text(".score-card")
            assert "72.72" in card and word in card, card
            assert "62.86" not in page.inner_text("main"), card
        finally:
            context.close()
