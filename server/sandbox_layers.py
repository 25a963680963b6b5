"""Each worker's sandbox layers, as staff see them on the queue-health page.

A worker runs the sandbox probe (``graders.host_modules.host_probe``: the sandbox's layers and the
modules an assignment allows that the host cannot import) when it starts and stores the result in
Redis under its RQ name; ``./distgrade up`` prints the same probe at start-up.
Workers fail closed: unless the operator set ``DISTGRADE_SANDBOX=none``, a worker grades only
with every required layer (``DISTGRADE_SANDBOX=required``), and a job on a worker that lacks
one ends as an infrastructure error (retried, no attempt used).
"""
from __future__ import annotations

import json
import os
from typing import Any

KEY = "distgrade:sandbox:{}"
TTL_S = 7 * 24 * 3600


def fail_closed_by_default() -> None:
    """Make this process (and the graders it starts) refuse missing layers unless told ``none``."""
    if os.environ.get("DISTGRADE_SANDBOX", "auto") != "none":
        os.environ["DISTGRADE_SANDBOX"] = "required"


def describe(found: dict[str, Any]) -> str:
    """The probe as the lines ``./distgrade up`` prints."""
    lines = [f"sandbox ({found.get('enforcement')}): bwrap {found.get('bwrap') or 'not found'}",
             "  layers: " + ", ".join(found.get("layers") or ["none"])]
    lines += [f"  degraded: {d}" for d in found.get("degraded") or []]
    if found.get("missing") or found.get("error"):
        lines.append("  MISSING: " + "; ".join(found.get("missing") or []) + (
            f" ({found['error']})" if found.get("error") else ""))
        if found.get("enforcement") == "required":
            lines.append("  Grading jobs will fail as infrastructure errors until this is fixed "
                         "(or DISTGRADE_SANDBOX=none is set, which runs student code without these protections).")
    lines += [f"  cannot import (submissions that do are not graded here): {m}" for m in found.get("modules") or []]
    return "\n".join(lines)


def publish(conn: Any, worker_name: str, found: dict[str, Any]) -> None:
    """Store this worker's probe for the queue-health page."""
    conn.set(KEY.format(worker_name), json.dumps(found), ex=TTL_S)


def read(conn: Any, worker_name: str) -> dict[str, Any] | None:
    """A worker's stored probe, or None (an older worker, or Redis lost it)."""
    raw = conn.get(KEY.format(worker_name))
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
