"""``python -m server.grading.worker``: an RQ worker for this host's queues plus a reconciler thread.

It also measures the reference solutions' speed at start-up and between jobs when it is due
(``graders.ddp_speedup.calibration``); a student's job never waits for it (the calibration gives way), and
gradings left "pending calibration" are re-scored when a value lands. ``DISTGRADE_CALIBRATE=0``
turns that off (the tests do).

The host's GPU count (``WORKER_GPUS``, ``DISTGRADE_FAKE_GPUS`` for a simulated host,
else what ``nvidia-smi -L`` lists) decides its queues, so a CPU host never takes a
job that needs two GPUs. Several workers on one host share its GPUs through
``graders.gpu_slots``. Every worker reconciles; ``reconcile`` is safe to run
concurrently.
"""
from __future__ import annotations

import gc
import os
import signal
import threading

import redis
from rq import Queue, Worker

from graders.gpu_slots import host_gpus
from server.grading.queue import queues_for_host, redis_conn
from server.lti import schedule as lti_schedule
from server.lti.passback import QUEUE as lti_queue
from server.grading.reconcile import RECONCILE_EVERY_S, reconcile
from server.grading.workers import WORKER_TTL_S
from server.grading.task import worker_app
from server.similarity import jobs as similarity_jobs
from server.process import die_with_parent


class GradingWorker(Worker):
    """RQ's worker whose work horse dies with it. The horse runs in a process group of its own, so
    signalling the worker's group (the supervisor's stop, SIGKILL after a grace period) never
    reached it: it went on grading as an orphan, with its grader and the grader's torchrun ranks.
    The grader already dies with the horse (``task.py``); this closes the chain above it. The
    job's lease then expires and the reconciler runs it again, costing no attempt."""

    def fork_work_horse(self, job, queue) -> None:
        self._worker_pid = os.getpid()
        super().fork_work_horse(job, queue)

    def main_work_horse(self, job, queue) -> None:
        die_with_parent(signal.SIGKILL)()
        if os.getppid() != getattr(self, "_worker_pid", os.getppid()):
            os._exit(1)  # the worker died between the fork and the line above
        super().main_work_horse(job, queue)

    def unsubscribe(self) -> None:
        """RQ's teardown, with a bounded wait for the pub/sub thread. When Redis goes down with the
        worker (the supervisor killed: every child gets SIGTERM at once), the pub/sub connection can
        drop before the worker's own last commands; the thread then waits up to 60 s for a
        subscription that never comes back, and redis-py's ``stop()`` joined it without a bound, so
        the worker outlived the service. The thread is a daemon: not waiting for it loses nothing."""
        if not self.pubsub_thread:
            return
        self.log.info("Worker %s: unsubscribing from channel %s", self.name, self.pubsub_channel_name)
        try:
            self.pubsub.unsubscribe()
        except redis.exceptions.RedisError:
            pass  # Redis is gone: there is nothing left to unsubscribe from
        self.pubsub_thread.stop(timeout=1)
        self.pubsub.close()


def warm_up_job_start() -> None:
    """Do once in this process what every work horse would otherwise do first, after its fork.

    A job's start (RQ's enqueue -> ``claim`` committed, what the student waits for) is spent mostly
    in the forked horse, and part of it was SQLAlchemy compiling the claim's UPDATE afresh in every
    horse (its statement cache dies with the horse) and the horse's garbage collector walking, and
    so copying, every object inherited from this process. A claim of submission 0 (ids start at 1:
    it matches no row) compiles the statement here, so each horse inherits it compiled; ``gc.freeze()``
    after start-up keeps the inherited objects out of the horse's collections. Measured side by
    side (2-core shared host, 40 jobs x 3 pairs): claim p50 16 -> 8 ms, the horse's dispatch
    17 -> 9 ms, enqueue -> claimed p50 43 -> 35 ms.
    """
    from server.extensions import db
    from server.grading import lifecycle
    from server.models import Submission

    try:
        lifecycle.claim(0)
        db.session.get(Submission, 0)
    except Exception:  # only a speed-up: a database not there yet must not stop the worker
        db.session.rollback()
    finally:
        db.session.remove()


def reconcile_forever(stop: threading.Event) -> None:
    """Run ``reconcile`` every few seconds until ``stop`` is set; survives Redis outages."""
    app = worker_app()
    while not stop.is_set():
        with app.app_context():
            try:
                reconcile()
                similarity_jobs.reconcile()  # after gradings: deadlines passed, lost runs, runs that may go
                lti_schedule.reconcile()  # queues the period's LMS roster syncs (the HTTP runs in their jobs)
            except redis.exceptions.RedisError as exc:
                app.logger.warning("reconcile: redis unavailable (%s)", exc)
            except Exception:  # a reconciler bug must not stop grading
                app.logger.exception("reconcile failed")
                from server.extensions import db
                db.session.rollback()
        stop.wait(RECONCILE_EVERY_S)


def rescore_after(app):
    """The calibration thread's ``on_landed``: re-score gradings left "pending calibration" (no rerun)."""
    def landed(assignment_id: str, mode: str, ref: dict) -> None:
        from server.grading.speed_rescore import rescore_pending
        with app.app_context():
            n = rescore_pending(assignment_id, mode, ref)
            app.logger.info("calibration of %s landed (%.3fx): %d grading(s) re-scored for speed",
                            assignment_id, ref.get("speedup") or 0, n)
    return landed


def refuse_pinned_seed() -> None:
    """Fail closed: a worker started with the sample runner's pinned synthetic seed would grade every
    homework-1 job on data anyone can regenerate (weights fitted offline pass the model evaluation)."""
    from graders.ddp_speedup.job import PINNED_SEED_ENV

    if os.environ.get(PINNED_SEED_ENV):
        raise SystemExit(f"{PINNED_SEED_ENV} is set: it pins homework 1's synthetic data to a known seed, for the "
                         "repository's own sample tests only. Unset it before starting a worker.")


def main() -> None:
    from graders import host_modules, workspace
    from server import sandbox_layers

    sandbox_layers.fail_closed_by_default()
    refuse_pinned_seed()
    workspace.sweep()  # folders a killed worker or grader of this host left behind
    app = worker_app()
    with app.app_context():
        conn = redis_conn()
        # LTI grade passback after every grading queue (a grading never waits behind an LMS call,
        # server.lti.passback), the similarity queue last (only when no grading job waits)
        names = queues_for_host(host_gpus().count) + [lti_queue, similarity_jobs.QUEUE]
        warm_up_job_start()
    stop = threading.Event()
    threading.Thread(target=reconcile_forever, args=(stop,), daemon=True).start()
    if os.environ.get("DISTGRADE_CALIBRATE", "1") != "0":  # the reference's speed, measured outside any student's job
        from graders.ddp_speedup.calibration import calibrate_forever
        mode = "gpu" if app.config["WORKER_GPUS"] or app.config["GRADER_MODE"] == "gpu" else "cpu"
        threading.Thread(target=calibrate_forever, args=(stop, mode), kwargs={"on_landed": rescore_after(app)},
                         daemon=True).start()
    worker = GradingWorker([Queue(n, connection=conn) for n in names], connection=conn,
                           worker_ttl=WORKER_TTL_S)  # frequent beats: a dead one is seen soon
    sandbox_layers.publish(conn, worker.name, host_modules.host_probe())  # shown on the queue-health page
    gc.freeze()  # see warm_up_job_start
    try:
        worker.work(with_scheduler=False)
    finally:
        stop.set()


if __name__ == "__main__":
    main()
