"""Fresh job directories: each grading gets its own, removed afterwards."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from coursework.assignments import Assignment
from coursework.exceptions import SubmissionRejected

JOBS_ROOT = Path(os.environ.get("DISTGRADE_JOBS_DIR", tempfile.gettempdir())) / "distgrade-jobs"


@contextlib.contextmanager
def job_dir(submission_id: str | None = None) -> Iterator[Path]:
    """Create a private job directory (mode 0711 on the root) and remove it afterwards.

    Each job directory is readable only by the grader; the sandbox binds just the
    pieces a run needs, so one job can never see another. The job holds a sandbox uid
    of its own for its whole life (``graders.sandbox.credentials.lease``), used by every
    run of the job; leaving reaps that uid and removes the folder.
    """
    from graders.sandbox import credentials

    JOBS_ROOT.mkdir(parents=True, exist_ok=True)
    os.chmod(JOBS_ROOT, 0o711)
    prefix = f"sub{submission_id}-" if submission_id else "cli-"
    with credentials.lease(job=True):
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=JOBS_ROOT))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)


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
