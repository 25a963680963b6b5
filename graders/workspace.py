"""Fresh job directories: each grading gets its own, removed afterwards."""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

from coursework.assignments import Assignment
from coursework.exceptions import SubmissionRejected
from graders.jobs_root import JOBS_ROOT
from graders.sandbox import cgroups, credentials


OWNER = ".owner"  # flock-held by the process that made the folder: free means its owner is gone
ORPHAN_GRACE_S = 3600  # a folder without an owner file (its maker died at birth) is removed after this
WORKER_TMP_PREFIX = "distgrade-sub"  # the worker's own folder per grading (server.grading.task)
SANDBOX_ETC_PREFIX = "distgrade-sandbox-etc-"  # a grader's /etc/hosts for its sandboxes (graders.sandbox.bwrap)
SWEPT_PREFIXES = (WORKER_TMP_PREFIX, SANDBOX_ETC_PREFIX)  # what sweep looks for in the temp folder


@contextlib.contextmanager
def owned_dir(prefix: str, parent: Path) -> Iterator[Path]:
    """A fresh folder under ``parent`` that ``sweep`` removes if this process dies without removing it.

    The folder holds ``.owner`` (0600) under an exclusive flock for as long as this process
    (or a child it handed the descriptor to, which it does not: close-on-exec) lives; the
    kernel drops the lock when the process dies, SIGKILL included.
    """
    path, fd = _claim(prefix, parent)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def process_dir(prefix: str, parent: Path | None = None) -> Path:
    """A fresh folder that lives as long as this process: removed at exit, and by ``sweep`` once
    the process is gone however it died (SIGKILL runs no exit handler). ``prefix`` must be one of
    ``SWEPT_PREFIXES`` when ``parent`` is the temp folder."""
    path, fd = _claim(prefix, parent or Path(tempfile.gettempdir()))
    atexit.register(shutil.rmtree, path, True)
    _held.append(fd)  # kept open (and locked) until the process ends
    return path


_held: list[int] = []


def _claim(prefix: str, parent: Path) -> tuple[Path, int]:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    fd = os.open(path / OWNER, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return path, fd


@contextlib.contextmanager
def job_dir(submission_id: str | None = None) -> Iterator[Path]:
    """Create a private job directory (mode 0711 on the root) and remove it afterwards.

    Each job directory is readable only by the grader; the sandbox binds just the
    pieces a run needs, so one job can never see another. The job holds a sandbox uid
    of its own for its whole life (``graders.sandbox.credentials.lease``), used by every
    run of the job; leaving reaps that uid and removes the folder. A grader killed before
    that (a killed worker, a replaced submission) leaves it to ``sweep``.
    """
    JOBS_ROOT.mkdir(parents=True, exist_ok=True)
    os.chmod(JOBS_ROOT, 0o711)
    prefix = f"sub{submission_id}-" if submission_id else "cli-"
    with credentials.lease(job=True), owned_dir(prefix, JOBS_ROOT) as path:
        yield path


def sweep() -> list[str]:
    """Remove the job folders, worker folders, sandbox /etc folders and cgroups whose owner process is
    gone; returns the folders.

    Safe while other graders run: a live owner holds its folder's lock. Called when a worker
    starts and after each of its gradings, so what a killed worker or grader left goes soon.
    """
    cgroups.sweep()  # the empty groups of a killed grader's runs
    removed = []
    places = [(JOBS_ROOT, None)] + [(Path(tempfile.gettempdir()), p) for p in SWEPT_PREFIXES]
    for parent, prefix in places:
        try:
            names = [n for n in os.listdir(parent) if prefix is None or n.startswith(prefix)]
        except OSError:
            continue
        for name in names:
            path = parent / name
            if path.is_symlink() or not path.is_dir() or not _owner_gone(path):
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


def _owner_gone(path: Path) -> bool:
    try:
        fd = os.open(path / OWNER, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:  # made by an older version, or its maker died between mkdtemp and the lock
        try:
            return time.time() - path.stat().st_mtime > ORPHAN_GRACE_S
        except OSError:
            return False
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the probe's own lock at once
    return True


def stage_submission(assignment: Assignment, src: str | os.PathLike[str], job: Path) -> list[Path]:
    """Copy the submitted file(s) into ``job/submission`` after validating them."""
    src = Path(src)
    dest = job / "submission"
    dest.mkdir()
    if src.is_dir():
        candidates = [p for p in sorted(src.iterdir())
                      if p.is_file() and p.suffix.lower() in assignment.extensions]
        if not candidates:
            raise SubmissionRejected("文件夹中没有可评分的文件。", "The folder holds no gradable file.")
    elif src.is_file():
        candidates = [src]
    else:
        raise SubmissionRejected("找不到提交的文件。", f"No such file: {src}")
    staged = []
    for p in candidates:
        data = p.read_bytes()
        assignment.validate_upload(p.name, data)
        out = dest / p.name
        out.write_bytes(data)
        staged.append(out)
    return staged
