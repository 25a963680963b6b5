"""Live progress from a running grader to the worker that started it.

The worker sets ``DISTGRADE_PROGRESS_FILE``; graders call ``report_progress``
(phase name plus a short tail of each rank's log) and the worker copies the
latest snapshot into the job's metadata for the status page. Without the
variable (the CLI), progress is ignored.
"""
from __future__ import annotations

import json
import os
import time

TAIL_CHARS = 2000


def report_progress(phase: str, logs: dict[str, str] | None = None, **extra: object) -> None:
    """Atomically replace the progress snapshot; never raises."""
    path = os.environ.get("DISTGRADE_PROGRESS_FILE")
    if not path:
        return
    snapshot = {"phase": phase, "at": time.time(),
                "logs": {k: v[-TAIL_CHARS:] for k, v in (logs or {}).items()}, **extra}
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(snapshot, f, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError:
        pass


def read_progress(path: str) -> dict | None:
    """Read the latest snapshot written by ``report_progress`` (None if absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
