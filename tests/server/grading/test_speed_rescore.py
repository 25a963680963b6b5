"""Gradings left "pending calibration" are re-scored in the database when the calibration lands:
only the speed check changes, the student's code does not run again, and a row
regraded meanwhile is not overwritten. A real SQLite database through the app."""
from __future__ import annotations

from tests.graders.test_speed import _pending_report


def _graded(app, report):
    from server.extensions import db
    from server.models import Submission, User, utcnow
    with app.app_context():
        user = db.session.scalar(db.select(User).where(User.username == "alice"))
        sub = Submission(user_id=user.id, course_id=1, assignment_id="ddp_speedup", status="graded", mode="cpu",
                         filename="train.py", content=b"x", sha256=Submission.digest(b"x"), size=1,
                         started_at=utcnow(), finished_at=utcnow(), score=report["score"],
                         max_score=report["max_score"], report_json=report)
        db.session.add(sub)
        db.session.commit()
        return sub.id


def test_pending_speed_is_scored_when_the_calibration_lands(app):
    from server.extensions import db
    from server.grading.speed_rescore import rescore_pending
    from server.models import Submission
    pending, other = _graded(app, _pending_report(1.75)), _graded(app, _pending_report(1.75))
    with app.app_context():
        assert db.session.get(Submission, pending).score == 90
        db.session.get(Submission, other).status = "running"  # being regraded: not touched
        db.session.commit()
        assert rescore_pending("ddp_speedup", "cpu", {"t1": 1000.0, "tn": 1800.0, "speedup": 1.8, "at": 5.0}) == 1
        db.session.expire_all()
        sub = db.session.get(Submission, pending)
        assert (sub.score, sub.max_score) == (100, 100)
        speed = next(c for c in sub.report_json["checks"] if c["id"] == "speedup")
        assert speed["status"] == "pass" and sub.report_json["rescored"]["reference_at"] == 5.0
        assert db.session.get(Submission, other).report_json["score"] == 90
        assert rescore_pending("ddp_speedup", "cpu", {"t1": 1.0, "tn": 2.0, "speedup": 2.0, "at": 6.0}) == 0
