"""One way to read a student's file: a script of the grader's in a sandboxed process, one JSON line back.

``weights`` (a full checkpoint's sums) and ``model`` (rank 0's model scored on held-out data) both load what the
student's process wrote, so neither loads it in the grader: each runs its script with torch on one thread, only
the script and the files it reads bound read-only, 4 GiB of memory, and takes the last line of its output.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from graders import sandbox

MEMORY_BYTES = 4 * 1024 * sandbox.MiB


def run(script: Path, args: list[str], reads: list[str], workdir: Path,
        wall_s: int) -> tuple[Any, sandbox.SandboxResult]:
    """(the JSON value ``script`` printed last, or None where it printed none; the sandbox's result)."""
    binds = [(str(script), str(script))] + [(p, p) for p in dict.fromkeys(reads)]
    result = sandbox.run([sys.executable, str(script), *args], workdir=workdir,
                         env={"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}, ro_binds=binds,
                         limits=sandbox.Limits(wall_s=wall_s, memory_bytes=MEMORY_BYTES, nproc=256, address_space=False))
    try:
        return json.loads(result.stdout.strip().splitlines()[-1]), result
    except (ValueError, IndexError):
        return None, result
