"""Regrade end to end with real processes: the dashboard puts finished submissions back in the
normal queue, a real RQ worker grades them again, and the regrade page says which scores changed."""
from __future__ import annotations

from tests.server.grading.test_worker import all_final, probe, rows, submit, wait_until  # noqa: F401


def test_regrade_after_a_grader_change_through_the_real_worker(probe):  # noqa: F811
    from server.extensions import db
    from server.models import Submission

    probe.start_worker()
    same, fixed = submit(probe.app, "score 0.5"), submit(probe.app, "score 0.5", username="bob")
    wait_until(lambda: all_final(probe.app, [same, fixed]), 30, "first grading")
    with probe.app.app_context():  # what an older, buggy grader had given bob
        db.session.get(Submission, fixed).score = 0.2
        db.session.commit()
    from server import create_app

    web = create_app({**{k: probe.app.config[k] for k in ("SQLALCHEMY_DATABASE_URI", "REDIS_URL", "VAR_DIR")},
                      "WTF_CSRF_ENABLED": False, "SECRET_KEY": "test-only-secret-key-0123456789"})  # the pages, without CSRF tokens
    client = web.test_client()
    client.post("/login", data={"username": "teacher", "password": "teacher-pass"})
    r = client.post("/dashboard/DIST101/homework/probe/regrade", data={"confirm": "2"})  # the count shown
    assert r.status_code == 302 and "/regrades/" in r.location
    subs = wait_until(lambda: all_final(probe.app, [same, fixed]), 30, "regrading")
    assert [(subs[i].score, subs[i].grading_runs, subs[i].results_stored) for i in (same, fixed)] == \
        [(0.5, 2, 1), (0.5, 2, 1)]
    page = client.get(r.location + "?lang=en").get_data(as_text=True)
    assert "2 of 2 finished" in page and "1 score changed" in page
    assert rows(probe.app, [fixed])[fixed].enqueue_gen == 2
