"""The RQ job: grade one stored submission, exactly once.

The job takes a database lease on the submission (``lifecycle.claim``), runs
``python -m graders grade`` as a subprocess in its own session with an outer
time limit, relays the grader's progress to the status page, and stores the
report with a compare-and-set on its run token (``lifecycle.store_report``), so a duplicate job or a
re-enqueue after a lost worker can never store a second result.

Failures are contained: nothing a submission or a grader does raises out of
``grade_submission``; an infrastructure failure is retried once and then ends
as ``error``, never costing the student an attempt.

A job whose queue class needs GPUs (``gpu2``) first runs the CPU pre-flight
(``graders.preflight``): a broken script is graded from it and never waits for a
GPU. Then it waits in this host's line for k free GPUs (``graders.gpu_slots``),
runs the grader with exactly those (``DISTGRADE_GPUS``; the grader process inherits
the slot locks, so they are held until it and this job are both gone) and records
them in the report. A job whose submission was replaced by a newer upload notices
at its next heartbeat and stops.
"""
from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from flask import Flask, current_app

from coursework.assignments import load
from coursework.exceptions import AssignmentNotFound
from coursework.progress import read_progress
from graders import gpu_slots, preflight, workspace
from graders.ddp_speedup import job as ddp_job
from server.extensions import db
from server.scores import events
from server.grading import lifecycle
from server.grading.queue import enqueue, try_dispatch
from server.models import Submission, utcnow
from server.process import die_with_parent

_app: Flask | None = None
# ``python -m graders`` runs from the repository root, so it finds the graders without relying on the
# editable install (on the first GPU host, which had none, every grading failed "No module named graders").
REPO_ROOT = Path(__file__).resolve().parents[2]


class InfraFailure(Exception):
    """The grading machinery failed (timeout of the grader, no report, sandbox setup)."""


class Cancelled(Exception):
    """This run lost its lease (a newer upload replaced the submission, or the reconciler took it)."""


def worker_app() -> Flask:
    """The Flask app of this worker process (created once, reused by every job)."""
    global _app
    if _app is None:
        from server import create_app
        _app = create_app()
    return _app


def grade_submission(submission_id: int) -> str:
    """RQ entry point. Returns a short word for RQ's result; never raises for bad input."""
    try:
        return _grade_submission(submission_id)
    finally:
        workspace.sweep()  # what this grading's killed grader (replaced, timed out) or a dead worker left


def _grade_submission(submission_id: int) -> str:
    app = worker_app()
    with app.app_context():
        db.engine.dispose(close=False)  # connections inherited over fork are not ours
        token = lifecycle.claim(submission_id)
        if token is None:
            return "skipped"
        resource = db.session.get(Submission, submission_id).resource
        try_dispatch(resource)  # this job left RQ: hand it the next one in fair order
        heartbeat = _Heartbeat(app, submission_id, token)
        heartbeat.start()
        try:
            report = _run_grader(submission_id, heartbeat)
        except Cancelled:
            heartbeat.stop()
            try_dispatch(resource)
            return "replaced"
        except InfraFailure as exc:
            heartbeat.stop()
            return _infra_failed(submission_id, token, str(exc))
        except Exception as exc:  # a bug here must not lose the submission either
            heartbeat.stop()
            current_app.logger.exception("grading task failed for %s", submission_id)
            return _infra_failed(submission_id, token, f"{type(exc).__name__}: {exc}")
        heartbeat.stop()
        result = lifecycle.store_report(submission_id, token, report)
        try_dispatch(resource)
        sub = db.session.get(Submission, submission_id)
        events.changed(sub.course_id, sub.user_id, f"hw:{sub.assignment_id}")  # a course from an LMS: send it
        return result


def _run_grader(submission_id: int, heartbeat: "_Heartbeat") -> dict[str, Any]:
    sub = db.session.get(Submission, submission_id)
    timeout = current_app.config["GRADE_TIMEOUT_S"]
    k = gpu_slots.needed(sub.resource)
    try:
        assignment = load(sub.assignment_id)
    except AssignmentNotFound:
        assignment = None  # the grader itself reports the unknown assignment
    with workspace.owned_dir(f"{workspace.WORKER_TMP_PREFIX}{submission_id}-", Path(tempfile.gettempdir())) as tmp:
        src = Path(tmp) / "in" / Path(sub.filename).name
        src.parent.mkdir()
        src.write_bytes(sub.content)
        progress_file = Path(tmp) / "progress.json"
        env = dict(os.environ, DISTGRADE_PROGRESS_FILE=str(progress_file), PYTHONUNBUFFERED="1")
        env.pop(ddp_job.PINNED_SEED_ENV, None)  # each job draws its own secret data (the worker refuses it anyway)
        env[TRUSTED_ENV] = _trusted_annotation_fields()
        db.session.commit()  # release the row before a long run
        if k and assignment is not None and preflight.needs_preflight(assignment, sub.resource, sub.mode):
            _set_phase(submission_id, heartbeat.token, "preflight")
            argv, pre_env = preflight.command(assignment, str(src), str(sub.id), env)
            report = _run_report(argv, pre_env, submission_id, progress_file, timeout, heartbeat)
            failed = preflight.verdict(assignment, report)
            if failed:
                return preflight.final_report(report, failed)
            progress_file.unlink(missing_ok=True)  # the GPU run's progress starts afresh
            _set_phase(submission_id, heartbeat.token, "waiting_gpu")  # "checked on CPU, waiting for a GPU"
        mode, lease = sub.mode, None
        if k:
            lease = _take_gpus(k, submission_id, heartbeat)
            env["DISTGRADE_GPUS"] = ",".join(map(str, lease.gpus))
            if lease.fake:  # a simulated host: real slots, CPU run
                mode = "cpu"
                env["DISTGRADE_FAKE_GPUS"] = str(len(lease.gpus))
            _set_phase(submission_id, heartbeat.token, "starting")
        argv = [sys.executable, "-m", "graders", "grade", sub.assignment_id, str(src), "--json",
                "--submission-id", str(sub.id), "--mode", mode]
        held_from = time.time()
        try:
            report = _run_report(argv, env, submission_id, progress_file, timeout, heartbeat,
                                 pass_fds=tuple(lease.fds) if lease else ())
        finally:
            if lease:
                lease.release()
        if lease:
            report["resources"] = {"gpus": lease.gpus, "fake": lease.fake, "waited_s": lease.waited_s,
                                   "host": platform.node(), "held_from": held_from, "held_to": time.time()}
        return report


TRUSTED_ENV = "DISTGRADE_TRUSTED_READINGS"  # read by graders.config_annotation.core (policy "untrusted")


def _trusted_annotation_fields() -> str:
    """JSON list of ``dialect:path:kind`` (kind: full, partial or zero) where the notes' rule reading
    earned trust for verdicts of that kind (``server.quiz.labels``, ``coursework.trust``)."""
    from server.quiz import labels

    prefix = labels.ANNOTATION_ITEM
    return json.dumps(sorted(f"{a.item[len(prefix):]}:{a.kind}" for a in labels.kind_table(prefix)
                             if a.reader == "rule" and a.earned()))


def _take_gpus(k: int, submission_id: int, heartbeat: "_Heartbeat") -> gpu_slots.Lease:
    """Wait in this host's line for k GPUs; a replaced submission stops waiting."""
    host = gpu_slots.host_gpus()
    folder = os.environ.get("DISTGRADE_GPU_SLOT_DIR") or str(Path(current_app.config["VAR_DIR"]) / "gpu-slots")
    try:
        pool = gpu_slots.SlotPool(folder, host, None if host.fake else gpu_slots.read_topology(host.count))
        return pool.acquire(k, label=f"submission={submission_id}", should_stop=heartbeat.cancelled.is_set)
    except gpu_slots.Stopped:
        raise Cancelled(f"submission {submission_id} stopped waiting for a GPU") from None
    except gpu_slots.SlotError as exc:
        raise InfraFailure(f"GPU slots: {exc}") from exc


def _set_phase(submission_id: int, token: str, phase: str) -> None:
    """Show ``phase`` on the status page; a run that lost its lease writes nothing and stops."""
    if not lifecycle.report_progress(submission_id, token, {"phase": phase, "logs": {}}):
        raise Cancelled(f"submission {submission_id} lost its lease")


def _run_report(argv: list[str], env: dict[str, str], submission_id: int, progress_file: Path, timeout: float,
                heartbeat: "_Heartbeat", pass_fds: tuple[int, ...] = ()) -> dict[str, Any]:
    """Run one ``python -m graders grade`` and return its JSON report."""
    # A lost job (its process SIGKILLed) takes the grader, and through the sandbox the ranks, along.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True, preexec_fn=die_with_parent(signal.SIGKILL),
                            cwd=str(REPO_ROOT), pass_fds=pass_fds)
    out, err = _wait_relaying_progress(proc, submission_id, progress_file, timeout, heartbeat)
    if proc.returncode not in (0, 1):
        raise InfraFailure(f"grader exited with {proc.returncode}: {err.decode(errors='replace')[-4000:]}")
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InfraFailure(f"grader printed no report; stderr: {err.decode(errors='replace')[-4000:]}")


def _wait_relaying_progress(proc: subprocess.Popen, submission_id: int, progress_file: Path,
                            timeout: float, heartbeat: "_Heartbeat") -> tuple[bytes, bytes]:
    """Wait for the grader, copying its progress snapshots into the database once a second
    (guarded by the run's token: a run that lost its lease kills its grader and stops)."""
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
        if heartbeat.cancelled.is_set():
            _kill_group(proc)  # replaced by a newer upload: free the slot now
            raise Cancelled(f"submission {submission_id} lost its lease")
        snap = read_progress(str(progress_file))
        if snap and snap != last:
            last = snap
            if not lifecycle.report_progress(submission_id, heartbeat.token, snap):
                heartbeat.cancelled.set()  # another run owns it now: its progress is the one shown
                _kill_group(proc)
                raise Cancelled(f"submission {submission_id} lost its lease")
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


def _infra_failed(submission_id: int, token: str, detail: str) -> str:
    """``lifecycle.fail_infra``, then a retried submission goes straight back to RQ."""
    db.session.rollback()  # the failure may have left the session mid-transaction
    outcome = lifecycle.fail_infra(submission_id, token, detail)
    if outcome == "retrying":
        try:
            enqueue(db.session.get(Submission, submission_id))
        except Exception:  # Redis down: the reconciler will enqueue it
            current_app.logger.exception("re-enqueue of %s failed", submission_id)
    return outcome


class _Heartbeat(threading.Thread):
    """Renews the submission's lease while this job is alive."""

    def __init__(self, app: Flask, submission_id: int, token: str):
        super().__init__(daemon=True)
        self.app, self.submission_id, self.token = app, submission_id, token
        self._stop_event = threading.Event()
        self.cancelled = threading.Event()  # the row no longer carries our token: stop the run

    def run(self) -> None:
        with self.app.app_context():
            interval = lifecycle.heartbeat_interval()
        while not self._stop_event.wait(interval):
            with self.app.app_context():
                try:
                    if not lifecycle.renew(self.submission_id, self.token):
                        self.cancelled.set()
                except Exception:  # a missed beat only shortens the lease
                    db.session.rollback()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
