"""A submission held for an integrity review, as the student sees it in a real Chromium at 375 px:
"under review" on the report, the submission list and the homework list, in
both languages, no detection detail, and nothing scrolls sideways; the instructor's integrity page
at the same width shows the event and its line. One gunicorn for the module, its own seed.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, Service, redis_server_flush
from tests.server.ui.test_browser import _login, _shot, _shots

pytestmark = pytest.mark.browser

SEED = """
import copy, json
from datetime import timedelta
from server import create_app
from server.extensions import db
from server.grading.lifecycle import claim, store_report
from server.models import Course, Submission, User, utcnow
from tests.server.ui_seed import ddp_report

app = create_app()
with app.app_context():
    course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
    alice = db.session.scalar(db.select(User.id).where(User.username == "alice"))
    data = b"import torch\\nimport gc\\nobs = torch.autograd.backward.__closure__\\n"
    now = utcnow()
    sub = Submission(user_id=alice, course_id=course.id, assignment_id="ddp_speedup", status="queued", mode="cpu",
                     filename="train.py", content=data, sha256=Submission.digest(data), size=len(data),
                     created_at=now - timedelta(minutes=5), enqueued_at=now - timedelta(minutes=5))
    db.session.add(sub)
    db.session.commit()
    report = ddp_report()
    report["integrity"] = {"computed_score": report["score"], "events": [
        {"source": "static", "kind": "scan", "rank": None, "detail": "train.py:3: .__closure__ (closure introspection)"}]}
    report.update(status="needs_review", score=0.0)
    token = claim(sub.id)
    assert store_report(sub.id, token, report) == "graded"
    print(json.dumps({"held": sub.id}))
"""
# the widest elements outside scroll containers (those may be wider: they scroll by themselves)
WIDEST_OUT = """[...document.querySelectorAll('body *')].filter(e => !e.closest('.table-scroll')
  && e.getBoundingClientRect().right > innerWidth + 1)
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""
WORDS = {"en": ("Under review", "under review", "under review: not final"), "zh_CN": ("复核中", "复核中", "正在复核")}


@pytest.fixture(scope="module")
def held(tmp_path_factory, redis_server, demo_databases):
    tmp = tmp_path_factory.mktemp("held")
    redis_server_flush(redis_server)
    svc = Service(tmp, redis_server.url)
    svc.seed(demo_databases)
    out = subprocess.run([sys.executable, "-c", SEED], cwd=REPO, env=svc.env, check=True, capture_output=True,
                         text=True).stdout
    svc.ids = json.loads(out.strip().splitlines()[-1])
    svc.start_web()
    yield svc
    svc.stop()


def _no_sideways(page, url: str) -> str:
    assert page.goto(url).status == 200, url
    assert page.evaluate("document.documentElement.scrollWidth") <= page.evaluate("innerWidth"), \
        (url, page.evaluate(WIDEST_OUT))
    return page.inner_text("main")


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_a_held_submission_reads_under_review_on_a_phone(held, browser, tmp_path, lang):
    big, row, overview = WORDS[lang]
    shots, sid = _shots(tmp_path), held.ids["held"]
    context = browser.new_context(viewport={"width": 375, "height": 800})
    page = context.new_page()
    try:
        _login(page, held.url, "alice", "alice-pass", lang)
        text = _no_sideways(page, f"{held.url}/submissions/{sid}")
        assert big in text and page.locator(".score-num").count() == 0
        assert "closure" not in text and "train.py:3" not in text
        _shot(page, shots, f"held-report-{lang}")
        text = _no_sideways(page, f"{held.url}/homework/DIST101/ddp_speedup")
        line = page.locator(f"tr:has(a[href='/submissions/{sid}'])").inner_text()
        assert row in line.lower() and "0 / 100" not in line
        _shot(page, shots, f"held-history-{lang}")
        assert overview in _no_sideways(page, f"{held.url}/homework/")
        page.context.clear_cookies()
        _login(page, held.url, "teacher", "teacher-pass", lang)
        text = _no_sideways(page, f"{held.url}/dashboard/DIST101/integrity")
        assert "obs = torch.autograd.backward.__closure__" in text
        _shot(page, shots, f"held-staff-{lang}")
    finally:
        context.close()
