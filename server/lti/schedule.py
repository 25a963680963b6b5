"""The roster sync on a schedule, inside the workers' reconcile loop (no daemon of its own): every
``LTI_ROSTER_SYNC_S`` seconds (0: never) one job per course linked to an LMS roster service goes to
the LTI queue. A Redis key taken with SET NX makes it once per period for the whole fleet, however
many workers run the loop; the HTTP to the LMS happens in the job, so an LMS that hangs holds up
neither grading nor the loop. Each job's outcome (counts, or the error) is kept for the course's page."""
from __future__ import annotations

import json
from typing import Any

from flask import current_app
from rq import Queue

from server.extensions import db
from server.grading.queue import redis_conn
from server.lti.models import LtiContext
from server.models import utcnow
from server.lti.passback import QUEUE
from server.lti import roster

DUE_KEY = "distgrade:lti:roster-sync-due"
LAST_KEY = "distgrade:lti:roster-last:"


def reconcile() -> int:
    """Queue the period's roster syncs if they are due; returns how many were queued."""
    period = int(current_app.config.get("LTI_ROSTER_SYNC_S") or 0)
    if period <= 0 or not redis_conn().set(DUE_KEY, utcnow().isoformat(), nx=True, ex=period):
        return 0
    courses = sorted({c.course_id for c in db.session.scalars(db.select(LtiContext)) if (c.services or {}).get("nrps")})
    q = Queue(QUEUE, connection=redis_conn())
    for course_id in courses:
        q.enqueue("server.lti.schedule.roster_job", course_id, job_timeout=300)
    return len(courses)


def roster_job(course_id: int) -> dict[str, Any]:
    """RQ entry point: sync one course's roster and keep the outcome; an LMS failure is recorded, not raised
    (the next period tries again)."""
    from flask import has_app_context

    if not has_app_context():
        from server.grading.task import worker_app

        with worker_app().app_context():
            return roster_job(course_id)

    try:
        outcome = {"at": utcnow().isoformat(timespec="seconds"), "counts": roster.sync(course_id), "error": ""}
    except Exception as err:  # noqa: BLE001  any LMS or network failure: shown to the instructor
        db.session.rollback()
        outcome = {"at": utcnow().isoformat(timespec="seconds"), "counts": {}, "error": str(err)[:500]}
    redis_conn().set(LAST_KEY + str(course_id), json.dumps(outcome), ex=30 * 86400)
    return outcome


def last_sync(course_id: int) -> dict[str, Any] | None:
    """The last scheduled sync's outcome for the course, if any."""
    raw = redis_conn().get(LAST_KEY + str(course_id))
    return json.loads(raw) if raw else None
