"""The RQ side of the queue (``server.grading.queue``) against a real redis-server."""
from __future__ import annotations

from rq import Queue, SimpleWorker
from rq.job import Job

from server.grading.worker import GradingWorker


class BurstWorker(SimpleWorker):
    """RQ's in-process worker with the service's bounded pub/sub teardown (``GradingWorker.unsubscribe``):
    RQ's own joined the pub/sub thread without a bound, and the test below took 60 s in 5 of 7 runs (4 s otherwise)."""

    unsubscribe = GradingWorker.unsubscribe


def test_a_job_enqueued_under_the_old_task_path_is_handed_to_rq_again(app, make_sub):
    """An upgrade moved the job function (``server.tasks`` -> ``server.grading.task``). A job still
    in Redis under the old path fails to import in an upgraded worker; the submission is still
    queued in the database, so the reconciler enqueues it again under the current path."""
    from server.extensions import db
    from server.grading import lifecycle
    from server.grading.queue import TASK, job_state, queue_name, redis_conn
    from server.grading.reconcile import reconcile
    from server.models import Submission

    sid = make_sub(status="queued")
    with app.app_context():
        conn = redis_conn()
        queue = Queue(queue_name("cpu"), connection=conn)
        old = lifecycle.mark_enqueued(db.session.get(Submission, sid))  # as the old release enqueued it
        queue.enqueue("server.tasks.grade_submission", sid, job_id=old)
        BurstWorker([queue], connection=conn).work(burst=True)  # the upgraded worker cannot import it
        assert job_state(old) == "failed"
        assert reconcile() == [sid]
        sub = db.session.get(Submission, sid)
        assert sub.status == "queued" and sub.job_id == f"sub-{sid}-g2"
        job = Job.fetch(sub.job_id, connection=conn)
        assert job.func_name == TASK and job.args == (sid,)
        assert TASK == "server.grading.task.grade_submission"
        from server.grading.task import grade_submission  # noqa: F401  (the path RQ imports exists)


def _started_by_a_worker(sid: int, started_at) -> str:
    """Hand the queued submission ``sid`` to RQ and move its job as a worker starting it at ``started_at``
    would (off the queue, "started"); returns the job id."""
    from rq.job import JobStatus

    from server.extensions import db
    from server.grading import lifecycle
    from server.grading.queue import queue_name, redis_conn
    from server.models import Submission

    queue = Queue(queue_name("cpu"), connection=redis_conn())
    job_id = lifecycle.mark_enqueued(db.session.get(Submission, sid))
    job = queue.enqueue("server.grading.task.grade_submission", sid, job_id=job_id)
    queue.remove(job)
    job.set_status(JobStatus.STARTED)
    job.started_at = started_at
    job.save()
    return job_id


def test_a_recovered_submission_whose_old_job_still_reads_started_is_handed_to_rq_again(app, make_sub):
    """A worker died mid-grading: its RQ job stays "started" in RQ's registry until RQ's own
    maintenance notices (minutes). The lease expired and recovery put the submission back in the
    queue, but Redis could not take the new job at that moment. The next pass must not read the
    dead job as live and skip the submission until RQ cleans its registry."""
    from datetime import timedelta

    from rq.job import JobStatus

    from server.extensions import db
    from server.grading import lifecycle
    from server.grading.queue import redis_conn
    from server.grading.reconcile import reconcile
    from server.models import Submission, utcnow

    sid = make_sub(status="queued")
    with app.app_context():
        old = _started_by_a_worker(sid, utcnow() - timedelta(minutes=10))  # a worker took it ...
        conn = redis_conn()
        assert lifecycle.claim(sid)  # ... claimed the submission, then died without a trace
        db.session.execute(db.update(Submission).where(Submission.id == sid)
                           .values(lease_until=utcnow() - timedelta(minutes=1)))
        db.session.commit()
        assert lifecycle.recover_expired() == {sid: "retrying"}  # Redis refused the new job here
        assert Job.fetch(old, connection=conn).get_status(refresh=True) == JobStatus.STARTED
        assert reconcile() == [sid]
        assert db.session.get(Submission, sid).job_id == f"sub-{sid}-g2"


def test_a_job_a_worker_just_started_is_not_enqueued_twice(app, make_sub):
    """Between RQ starting a job and the worker's claim there are milliseconds in which the
    submission is still queued: a reconciler passing then leaves it alone."""
    from server.extensions import db
    from server.grading.reconcile import reconcile
    from server.models import Submission, utcnow

    sid = make_sub(status="queued")
    with app.app_context():
        old = _started_by_a_worker(sid, utcnow())
        assert reconcile() == []
        assert db.session.get(Submission, sid).job_id == old


def test_a_reconciler_passing_between_the_mark_and_the_hand_over_does_not_enqueue_it_again(app, make_sub, monkeypatch):
    """``enqueue`` commits the next job id, then hands that job to RQ. A reconciler passing in between
    found the new id not yet in RQ and enqueued the submission a second time (one more generation, two
    jobs; seen under load in the regrade test). The hand-over is one process's until RQ holds the job."""
    from server.extensions import db
    from server.grading import lifecycle, queue as grading_queue
    from server.grading.reconcile import reconcile
    from server.models import Submission

    sid = make_sub(status="queued")
    seen: list[list[int]] = []
    mark = lifecycle.mark_enqueued

    def mark_then_a_reconciler_passes(sub):
        job_id = mark(sub)
        if not seen:  # the reconciler of another worker, once, in the gap
            seen.append([])
            seen[0] += reconcile()
        return job_id
    monkeypatch.setattr(lifecycle, "mark_enqueued", mark_then_a_reconciler_passes)
    with app.app_context():
        assert grading_queue.enqueue(db.session.get(Submission, sid)) == f"sub-{sid}-g1"
        assert seen == [[]]
        sub = db.session.get(Submission, sid)
        db.session.refresh(sub)
        assert (sub.enqueue_gen, sub.job_id) == (1, f"sub-{sid}-g1")
        waiting = Queue(grading_queue.queue_name("cpu"), connection=grading_queue.redis_conn()).job_ids
        assert waiting == [f"sub-{sid}-g1"]
        assert reconcile() == []  # once RQ holds it, later passes leave it too
