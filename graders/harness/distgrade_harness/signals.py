"""Which signals a rank sent itself or its peers, so the grader can tell a rank the student's
code killed from one killed from outside the job (the host's OOM killer, an operator).

An audit hook (it cannot be removed) records ``os.kill``, ``os.killpg``, ``signal.pthread_kill``
and a ``kill``/``pkill``/``killall`` subprocess as ``signal_sent`` records, at most
``MAX_RECORDS`` of them. A script that hides its own kill only turns its crash into an
infrastructure retry (no points, no attempt, staff told): never into a grade.
"""
from __future__ import annotations

import os
import sys

MAX_RECORDS = 16
_KILL_TOOLS = {"kill", "pkill", "killall"}
_CALLS = {"os.kill", "os.killpg", "signal.pthread_kill"}


def install(stream) -> None:
    """Record the signals this process sends on ``stream``."""
    state = {"sent": 0, "busy": False}

    def hook(event: str, args: tuple) -> None:
        if state["busy"] or state["sent"] >= MAX_RECORDS:
            return
        if event in _CALLS:
            sig = args[1] if len(args) > 1 and isinstance(args[1], int) else -1
        elif event == "subprocess.Popen" and len(args) > 1 and _is_kill_tool(args[0], args[1]):
            sig = -1  # a kill tool: which signal is in its arguments; any counts
        else:
            return
        state["busy"] = True  # sending may raise audit events of its own
        try:
            state["sent"] += 1
            stream.send({"type": "signal_sent", "call": event, "sig": int(sig)})
        except Exception:  # never break the student's run
            pass
        finally:
            state["busy"] = False

    sys.addaudithook(hook)


def _is_kill_tool(executable, argv) -> bool:
    first = executable if isinstance(executable, (str, bytes)) else None
    if first is None and isinstance(argv, (list, tuple)) and argv:
        first = argv[0]
    if isinstance(argv, (str, bytes)) and first is None:
        first = argv.split()[0] if argv.split() else ""
    if isinstance(first, bytes):
        first = first.decode(errors="replace")
    return isinstance(first, str) and os.path.basename(first.split()[0] if first.split() else "") in _KILL_TOOLS
