"""The similarity job: requested on demand or by a deadline, run by a worker after every first grading.

Like gradings, a run waits in the database (``queued``) and ``dispatch`` hands RQ its id only when
no submission waits for its first grading: a similarity check never delays a student's feedback.
RQ's queue for it (``distgrade-similarity``) is the last one every worker listens on, so even a
run already in RQ is taken only when no grading job waits there. Dispatch runs after a request and
in every worker's reconciler; job ids are ``sim-<id>-g<gen>`` with the generation advanced by a
compare-and-set, so two reconcilers hand RQ one job. A run whose worker died (its job gone from
RQ while the row says running) ends as ``error``; the instructor runs it again.

Each student's counted submission (the course's score policy, as the gradebook picks it) is
compared; the starter, the solution and the assignment's other boilerplate never count; files
of earlier terms under ``SIMILARITY_CORPUS_DIR/<assignment>/`` join as a reference corpus.
"""
from __future__ import annotations

import os
import traceback
from datetime import timedelta
from typing import Iterator

import redis
from flask import current_app
from rq import Queue
from rq.job import JobStatus
from sqlalchemy import update

from coursework import assignments
from coursework.similarity import Doc, compare, corpus_docs, excluded, extract, load_spec
from server.extensions import db
from server.grading.queue import job_state, queue_name, redis_conn
from server.models import CourseAssignment, Submission, SubmissionStatus, User, utcnow
from server.similarity.models import RunStatus, SimilarityRun
from server.scores.hand_scores import added_points_table, counted_score
from server.dashboard.stats import counted_ids

TASK = "server.similarity.jobs.run_similarity"
QUEUE = queue_name("similarity")
TIMEOUT_S = int(os.environ.get("SIMILARITY_TIMEOUT_S", "1800"))
QUEUED, RUNNING = RunStatus.QUEUED.value, RunStatus.RUNNING.value
LIVE = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}  # RQ still holds the job


def request_run(course_id: int, assignment_id: str, trigger: str = "manual", user_id: int | None = None) -> SimilarityRun:
    """Queue a run of one homework (the one already waiting, if any) and dispatch what may go."""
    run = db.session.scalar(db.select(SimilarityRun).where(
        SimilarityRun.course_id == course_id, SimilarityRun.assignment_id == assignment_id,
        SimilarityRun.status == QUEUED))
    if run is None:
        run = SimilarityRun(course_id=course_id, assignment_id=assignment_id, trigger=trigger, requested_by=user_id)
        db.session.add(run)
        db.session.commit()
    try_dispatch()
    return run


def first_gradings_waiting() -> bool:
    """Whether any submission waits for its first grading (a regrade does not hold a run back)."""
    return db.session.scalar(db.select(Submission.id).where(
        Submission.status == SubmissionStatus.QUEUED.value, Submission.grading_runs == 0).limit(1)) is not None


def dispatch() -> list[int]:
    """Hand RQ the queued runs whose job it does not hold, unless a first grading waits."""
    if first_gradings_waiting():
        return []
    sent = []
    for run in db.session.scalars(db.select(SimilarityRun).where(SimilarityRun.status == QUEUED)).all():
        if job_state(run.job_id) in LIVE:
            continue
        gen = run.enqueue_gen + 1
        job_id = f"sim-{run.id}-g{gen}"
        won = db.session.execute(update(SimilarityRun).where(
            SimilarityRun.id == run.id, SimilarityRun.status == QUEUED, SimilarityRun.enqueue_gen == run.enqueue_gen)
            .values(enqueue_gen=gen, job_id=job_id)).rowcount == 1
        db.session.commit()
        if won:
            Queue(QUEUE, connection=redis_conn()).enqueue(TASK, run.id, job_id=job_id, job_timeout=TIMEOUT_S,
                                                           result_ttl=3600, failure_ttl=86400)
            sent.append(run.id)
    return sent


def try_dispatch() -> list[int]:
    """``dispatch``; with Redis down the runs wait in the database for the reconciler."""
    try:
        return dispatch()
    except redis.exceptions.RedisError:
        db.session.rollback()
        return []


def deadline_runs(now=None) -> list[int]:
    """Request a run for every published homework whose deadline has passed and has none since."""
    now = now or utcnow()
    made = []
    for ca in db.session.scalars(db.select(CourseAssignment).where(
            CourseAssignment.deadline.is_not(None), CourseAssignment.deadline <= now)).all():
        done = db.session.scalar(db.select(SimilarityRun.id).where(
            SimilarityRun.course_id == ca.course_id, SimilarityRun.assignment_id == ca.assignment_id,
            SimilarityRun.trigger == "deadline", SimilarityRun.created_at >= ca.deadline).limit(1))
        if done is None:
            db.session.add(SimilarityRun(course_id=ca.course_id, assignment_id=ca.assignment_id, trigger="deadline"))
            db.session.commit()
            made.append(ca.id)
    return made


def recover_lost(now=None) -> list[int]:
    """Runs marked running whose job RQ no longer holds (their worker died): ``error``."""
    now = now or utcnow()
    lost = []
    for run in db.session.scalars(db.select(SimilarityRun).where(
            SimilarityRun.status == RUNNING, SimilarityRun.started_at < now - timedelta(seconds=60))).all():
        if job_state(run.job_id) not in LIVE and _finish(run.id, RunStatus.ERROR, error_detail="worker lost; run it again"):
            lost.append(run.id)
    return lost


def reconcile() -> None:
    """The reconciler's share (every worker, every few seconds): deadlines, lost runs, dispatch."""
    deadline_runs()
    recover_lost()
    dispatch()


def _finish(run_id: int, status: RunStatus, **values) -> bool:
    won = db.session.execute(update(SimilarityRun).where(SimilarityRun.id == run_id, SimilarityRun.status == RUNNING)
                             .values(status=status.value, finished_at=utcnow(), **values)).rowcount == 1
    db.session.commit()
    return won


def counted_submissions(course_id: int, assignment_id: str) -> list[int]:
    """Each student's counted graded submission under the course's score policy (best | last)."""
    policy = db.session.scalar(db.select(CourseAssignment.score_policy).where(
        CourseAssignment.course_id == course_id, CourseAssignment.assignment_id == assignment_id)) or "best"
    added = added_points_table()
    rows = db.session.execute(
        db.select(Submission.id, Submission.user_id, counted_score(added)).outerjoin(added, added.c.sid == Submission.id)
        .where(Submission.course_id == course_id, Submission.assignment_id == assignment_id,
               Submission.status == SubmissionStatus.GRADED.value)).all()
    return sorted(counted_ids(rows, policy))


def corpus_dir() -> str | None:
    """Where earlier terms' submissions are (``SIMILARITY_CORPUS_DIR``), if anywhere."""
    return current_app.config.get("SIMILARITY_CORPUS_DIR") or os.environ.get("SIMILARITY_CORPUS_DIR") or None


def submission_text(submission_id: int) -> str:
    """The compared text of one submission (also what the side-by-side view shows)."""
    filename, content = db.session.execute(db.select(Submission.filename, Submission.content)
                                           .where(Submission.id == submission_id)).one()
    return extract(filename, content or b"")


def _student_docs(ids: list[int]) -> Iterator[Doc]:
    """One submission at a time, so a class's files are never all in memory."""
    names = dict(db.session.execute(db.select(Submission.id, User.username).join(User, User.id == Submission.user_id)
                                    .where(Submission.id.in_(ids))).all())
    for sid in ids:
        yield Doc(f"sub:{sid}", submission_text(sid), label=names.get(sid, ""))
        db.session.expire_all()


def execute(run_id: int) -> str:
    """Run one queued similarity run in this app context; returns what happened (a short word)."""
    if first_gradings_waiting():
        return "waiting"  # still queued: the reconciler hands it back to RQ when gradings are done
    won = db.session.execute(update(SimilarityRun).where(SimilarityRun.id == run_id, SimilarityRun.status == QUEUED)
                             .values(status=RUNNING, started_at=utcnow())).rowcount == 1
    db.session.commit()
    if not won:
        return "skipped"
    run = db.session.get(SimilarityRun, run_id)
    try:
        a = assignments.load(run.assignment_id)
        spec = load_spec(a.path, a.raw)
        ids = counted_submissions(run.course_id, run.assignment_id)
        refs = corpus_docs(corpus_dir(), run.assignment_id)
        ref_texts = {d.key: d.text for d in refs}

        def reload(key: str) -> str:
            return ref_texts[key] if key.startswith("ref:") else submission_text(int(key[4:]))

        result = compare(_chain(_student_docs(ids), refs), excluded(spec), spec.kind, spec.settings, reload)
    except Exception:  # the run's error, never the worker's
        db.session.rollback()
        _finish(run_id, RunStatus.ERROR, error_detail=traceback.format_exc()[-8000:])
        return "error"
    summary = {"pairs": len(result["pairs"]), "clusters": len(result["clusters"]), **result["stats"]}
    _finish(run_id, RunStatus.DONE, result_json=result, summary_json=summary, error_detail=None)
    return "done"


def _chain(*parts):
    for part in parts:
        yield from part


def run_similarity(run_id: int) -> str:
    """RQ entry point (the worker's own app); never raises for a bad run."""
    from server.grading.task import worker_app

    with worker_app().app_context():
        db.engine.dispose(close=False)  # connections inherited over fork are not ours
        return execute(run_id)
