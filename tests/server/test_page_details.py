"""Small things on the pages that people noticed: the status timer, the upload limit, the menu."""
from __future__ import annotations

from datetime import timedelta

from server.models import Submission, utcnow


def test_the_status_timer_does_not_restart_when_grading_starts():
    from server.homework.rules import elapsed_s

    now = utcnow()
    sub = Submission(status="running", created_at=now - timedelta(seconds=100), enqueued_at=now - timedelta(seconds=100),
                     started_at=now - timedelta(seconds=40))
    assert elapsed_s(sub) >= 99  # the student has been waiting 100 s, not 40
    sub.status = "queued"
    assert elapsed_s(sub) >= 99
