"""Nobody but the course's instructors reaches any dashboard URL: every rule of the blueprint is
walked as an anonymous visitor (sent to sign in) and as a student (404, as for anything not theirs)."""
from __future__ import annotations

import pytest

from tests.server.conftest import PLACEHOLDER

VALUES = {"code": "DIST101", "username": "alice", "assignment_id": PLACEHOLDER, "quiz_id": "ch7_3_graded",
          "submission_id": None, "batch": "nobatch", "question_id": "ch7_3/selftest_1", "run_id": 1, "n": 0,
          "reader": "rule", "item": "ch7_3/selftest_1"}


def dashboard_urls(app, sid: int) -> list[tuple[str, str]]:
    """(method, url) for every rule of the dashboard blueprint, filled with real ids."""
    out = []
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("dashboard."):
            continue
        args = {k: (sid if k == "submission_id" else VALUES[k]) for k in rule.arguments}
        with app.test_request_context():
            from flask import url_for
            url = url_for(rule.endpoint, **args)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            out.append((method, url))
    return out


def test_the_walk_covers_every_rule(app, make_sub):
    urls = dashboard_urls(app, make_sub())
    assert len(urls) >= 18, urls


def test_anonymous_is_sent_to_sign_in_everywhere(app, client, make_sub):
    for method, url in dashboard_urls(app, make_sub()):
        r = client.open(url, method=method)
        assert r.status_code == 302 and "/login" in r.location, (method, url, r.status_code)


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_students_get_404_everywhere(app, client, auth, make_sub, who):
    sid = make_sub(who)
    auth.login(who, f"{who}-pass")
    for method, url in dashboard_urls(app, sid):
        r = client.open(url, method=method, data={"reason": "x", "score": "9", "item": f"hw:{PLACEHOLDER}"})
        assert r.status_code == 404, (method, url, r.status_code)


def test_a_student_cannot_change_anything(app, client, auth, make_sub):
    from server.scores.models import AuditEntry, Regrade, ScoreOverride
    from server.extensions import db

    sid = make_sub()
    auth.login()
    client.post(f"/dashboard/DIST101/submissions/{sid}/regrade")
    client.post("/dashboard/DIST101/students/alice/override", data={"item": f"hw:{PLACEHOLDER}", "score": "10",
                                                                   "reason": "me"})
    with app.app_context():
        for model in (AuditEntry, Regrade, ScoreOverride):
            assert db.session.scalar(db.select(db.func.count()).select_from(model)) == 0


def test_instructor_reaches_every_page(app, client, auth, make_sub):
    sid = make_sub()
    auth.login("teacher", "teacher-pass")
    for method, url in dashboard_urls(app, sid):
        if method != "GET" or "/regrades/" in url or "/similarity/1/" in url:
            continue  # a similarity pair needs a finished run: tests/server/dashboard/test_similarity.py
        r = client.get(url)
        assert r.status_code in (200, 302), (url, r.status_code)
