"""Nothing of a submission stays on disk once its run ends, however it ends.

A SIGKILLed worker (and its grader) never ran its clean-up: the grader's job folder
(``DISTGRADE_JOBS_DIR/distgrade-jobs/sub<N>-*``, the student's code and data) and the worker's
``distgrade-sub<N>-*`` folder stayed, about 9 MB each; a submission replaced by a newer upload
left its grader's job folder too. Real worker processes, a real kill.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.conftest import descendants
from tests.server.grading.test_worker import all_final, probe_service, rows, submit, wait_until


def leftovers(root: Path) -> list[str]:
    jobs = root / "jobs" / "distgrade-jobs"
    found = [p.name for p in jobs.iterdir()] if jobs.is_dir() else []
    return found + [p.name for p in (root / "tmp").iterdir() if p.name.startswith("distgrade-sub")]


def service(tmp_path, redis_server):
    (tmp_path / "tmp").mkdir()
    return probe_service(tmp_path, redis_server, timeout_s=60, lease_s=4,
                         DISTGRADE_JOBS_DIR=str(tmp_path / "jobs"), TMPDIR=str(tmp_path / "tmp"))


def test_a_killed_worker_leaves_nothing_once_the_job_is_retried(tmp_path, redis_server):
    svc = service(tmp_path, redis_server)
    try:
        sid = submit(svc.app, "sleep 6")
        w1 = svc.start_worker("w1")
        wait_until(lambda: len(leftovers(tmp_path)) >= 2, 60, "the running job's folders")
        for pid in [w1.pid, *descendants(w1.pid)]:  # the whole worker: main process, horse, grader
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        w1.wait()
        svc.procs.pop("w1")
        svc.start_worker("w2")
        sub = wait_until(lambda: all_final(svc.app, [sid]), 120, "the retried grading")[sid]
        assert sub.status == "graded" and sub.grading_runs == 2
        wait_until(lambda: leftovers(tmp_path) == [], 20, f"no folders left: {leftovers(tmp_path)}")
    finally:
        svc.stop()


def test_a_replaced_submission_leaves_nothing(tmp_path, redis_server):
    svc = service(tmp_path, redis_server)
    try:
        old = submit(svc.app, "sleep 30")
        svc.start_worker("w1")
        wait_until(lambda: rows(svc.app, [old])[old].status == "running" and len(leftovers(tmp_path)) >= 2,
                   60, "the first upload running")
        from server.grading.queue import submit as upload
        from tests.server.grading.test_worker import probe_upload

        with svc.app.app_context():
            new = probe_upload("score 1")
            upload(new)  # replaces the running one: its worker stops it at the next heartbeat
            new = new.id
        wait_until(lambda: all_final(svc.app, [new]), 90, f"the new upload graded: {[(s.status, s.progress_json, s.error_detail) for s in rows(svc.app, [old, new]).values()]}")
        wait_until(lambda: leftovers(tmp_path) == [], 20, f"no folders left: {leftovers(tmp_path)}")
    finally:
        svc.stop()
