"""The RQ side of the queue (``server.grading.queue``) against a real redis-server."""
from __future__ import annotations

from rq import Queue, SimpleWorker
from rq.job import Job


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
        SimpleWorker([queue], connection=conn).work(burst=True)  # the upgraded worker cannot import it
        assert job_state(old) == "failed"
        assert reconcile() == [sid]
        sub = db.session.get(Submission, sid)
        assert sub.status == "queued" and sub.job_id == f"sub-{sid}-g2"
        job = Job.fetch(sub.job_id, connection=conn)
        assert job.func_name == TASK and job.args == (sid,)
        assert TASK == "server.grading.task.grade_submission"
        from server.grading.task import grade_submission  # noqa: F401  (the path RQ imports exists)
