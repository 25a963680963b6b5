"""The RQ job: grade one stored submission, exactly once.

The job takes a database lease on the submission (compare-and-set), runs
``python -m graders grade`` as a subprocess in its own session with an outer
time limit, relays the grader's progress to the status page, and stores the
report with a compare-and-set on its run token, so a duplicate job or a
re-enqueue after a lost worker can never store a second result.

Failures are contained: nothing a submission or a grader does raises out of
``grade_submission``; an infrastructure failure is retried once and then ends
as ``error``, never costing the student an attempt.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from flask import Flask, current_app
from sqlalchemy import or_, update

from graders.progress import read_progress
from server.extensions import db
from server.models import Submission, SubmissionStatus, utcnow
from server.process import die_with_parent
from server.queue import enqueue, lease_deadline

_app: Flask | None = None


class InfraFailure(Exception):
    """The grading machinery failed (timeout of the grader, no report, sandbox setup)."""


def worker_app() -> Flask:
    """The Flask app of this worker process (created once, reused by every job)."""
    global _app
    if _app is None:
        from server import create_app
        _app = create_app()
    return _app


def grade_submission(submission_id: int) -> str:
    """RQ entry point. Returns a short word for RQ's result; never raises for bad input."""
    app = worker_app()
    with app.app_context():
        db.engine.dispose(close=False)  # connections inherited over fork are not ours
        token = _claim(submission_id)
        if token is None:
            return "skipped"
        heartbeat = _Heartbeat(app, submission_id, token)
        heartbeat.start()
        try:
            report = _run_grader(submission_id)
        except InfraFailure as exc:
            heartbeat.stop()
            return _infra_failed(submission_id, token, str(exc))
        except Exception as exc:  # a bug here must not lose the submission either
            heartbeat.stop()
            current_app.logger.exception("grading task failed for %s", submission_id)
            return _infra_failed(submission_id, token, f"{type(exc).__name__}: {exc}")
        heartbeat.stop()
        return _store(submission_id, token, report)


def _claim(submission_id: int) -> str | None:
    """Take the lease if the submission is queued (or its previous lease expired)."""
    token = uuid.uuid4().hex
    now = utcnow()
    won = db.session.execute(
        update(Submission)
        .where(Submission.id == submission_id,
               or_(Submission.status == SubmissionStatus.QUEUED.value,
                   (Submission.status == SubmissionStatus.RUNNING.value) & (Submission.lease_until < now)))
        .values(status=SubmissionStatus.RUNNING.value, run_token=token, started_at=now,
                lease_until=lease_deadline(), grading_runs=Submission.grading_runs + 1,
                progress_json={"phase": "starting", "logs": {}})
    ).rowcount
    db.session.commit()
    return token if won else None


def _run_grader(submission_id: int) -> dict[str, Any]:
    sub = db.session.get(Submission, submission_id)
    timeout = current_app.config["GRADE_TIMEOUT_S"]
    with tempfile.TemporaryDirectory(prefix=f"distgrade-sub{submission_id}-") as tmp:
        src = Path(tmp) / "in" / Path(sub.filename).name
        src.parent.mkdir()
        src.write_bytes(sub.content)
        progress_file = Path(tmp) / "progress.json"
        env = dict(os.environ, DISTGRADE_PROGRESS_FILE=str(progress_file), PYTHONUNBUFFERED="1")
        argv = [sys.executable, "-m", "graders", "grade", sub.assignment_id, str(src), "--json",
                "--submission-id", str(sub.id), "--mode", sub.mode]
        db.session.commit()  # release the row before a long run
        # A lost job (its process SIGKILLed) takes the grader, and through the sandbox the ranks, along.
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                start_new_session=True, preexec_fn=die_with_parent(signal.SIGKILL),
                                cwd=str(Path(__file__).resolve().parent.parent))
        out, err = _wait_relaying_progress(proc, submission_id, progress_file, timeout)
    if proc.returncode not in (0, 1):
        raise InfraFailure(f"grader exited with {proc.returncode}: {err.decode(errors='replace')[-4000:]}")
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InfraFailure(f"grader printed no report; stderr: {err.decode(errors='replace')[-4000:]}")


def _wait_relaying_progress(proc: subprocess.Popen, submission_id: int, progress_file: Path,
                            timeout: float) -> tuple[bytes, bytes]:
    """Wait for the grader, copying its progress snapshots into the database once a second."""
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda s=s, k=k: chunks[k].extend(iter(lambda: s.read(65536), b"")),
                                daemon=True) for s, k in ((proc.stdout, "out"), (proc.stderr, "err"))]
    for r in readers:
        r.start()
    deadline = utcnow().timestamp() + timeout
    last = None
    while proc.poll() is None:
        if utcnow().timestamp() > deadline:
            _kill_group(proc)
            raise InfraFailure(f"grader exceeded GRADE_TIMEOUT_S={timeout:g}s and was killed")
        snap = read_progress(str(progress_file))
        if snap and snap != last:
            last = snap
            db.session.execute(update(Submission).where(Submission.id == submission_id)
                               .values(progress_json=snap))
            db.session.commit()
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
    _kill_group(proc)  # anything the grader left behind goes with it
    for r in readers:
        r.join(timeout=5)
    return b"".join(chunks["out"]), b"".join(chunks["err"])


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _store(submission_id: int, token: str, report: dict[str, Any]) -> str:
    """Store the report once: only the run holding the lease token can write it."""
    crashed = report.get("status") == "error"
    values: dict[str, Any] = dict(
        status=SubmissionStatus.ERROR.value if crashed else SubmissionStatus.GRADED.value,
        finished_at=utcnow(), report_json=report, lease_until=None,
        results_stored=Submission.results_stored + 1,
        error_detail=report.get("staff_traceback") if crashed else None,
        progress_json={"phase": "done", "logs": {}},
    )
    if not crashed:
        values.update(score=report.get("score"), max_score=report.get("max_score"))
    review = report.get("status") == "needs_review"  # integrity events: 0 until an instructor decides
    values.update(review_status="pending" if review else None, review_reason=None, reviewed_by=None, reviewed_at=None,
                  computed_score=(report.get("integrity") or {}).get("computed_score") if review else None)
    won = db.session.execute(update(Submission).where(
        Submission.id == submission_id, Submission.status == SubmissionStatus.RUNNING.value,
        Submission.run_token == token).values(**values)).rowcount
    db.session.commit()
    return ("crashed" if crashed else "graded") if won else "superseded"


def _infra_failed(submission_id: int, token: str, detail: str) -> str:
    """Retry an infrastructure failure once, then end as error; never counts as an attempt."""
    db.session.rollback()
    sub = db.session.get(Submission, submission_id)
    if sub is None or sub.run_token != token or sub.status != SubmissionStatus.RUNNING.value:
        return "superseded"
    retry = sub.infra_retries < current_app.config["MAX_INFRA_RETRIES"]
    values: dict[str, Any] = dict(run_token=None, lease_until=None, error_detail=detail)
    if retry:
        values.update(status=SubmissionStatus.QUEUED.value, infra_retries=sub.infra_retries + 1)
    else:
        values.update(status=SubmissionStatus.ERROR.value, finished_at=utcnow())
    db.session.execute(update(Submission).where(Submission.id == submission_id,
                                                Submission.run_token == token).values(**values))
    db.session.commit()
    if retry:
        db.session.refresh(sub)
        try:
            enqueue(sub)
        except Exception:  # Redis down: the reconciler will enqueue it
            current_app.logger.exception("re-enqueue of %s failed", submission_id)
    return "retrying" if retry else "error"


class _Heartbeat(threading.Thread):
    """Renews the submission's lease while this job is alive."""

    def __init__(self, app: Flask, submission_id: int, token: str):
        super().__init__(daemon=True)
        self.app, self.submission_id, self.token = app, submission_id, token
        self._stop_event = threading.Event()

    def run(self) -> None:
        interval = max(1.0, self.app.config["LEASE_S"] / 3)
        while not self._stop_event.wait(interval):
            with self.app.app_context():
                try:
                    db.session.execute(update(Submission).where(
                        Submission.id == self.submission_id, Submission.run_token == self.token)
                        .values(lease_until=lease_deadline()))
                    db.session.commit()
                except Exception:  # a missed beat only shortens the lease
                    db.session.rollback()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
