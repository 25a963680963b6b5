"""Run untrusted student code with limits.

INTERFACE (stable, used by every runner):

    result = sandbox.run(argv, workdir=job/"run", limits=Limits(...), env={...},
                         ro_binds=[(host_path, path_inside)], rw_binds=[...],
                         gpus=None)

``argv`` and paths are as seen *inside* the sandbox; ``workdir`` is bound
read-write at the same path. The returned ``SandboxResult`` says how the run
ended and which isolation layers were in force (``layers``), so the report can
show them.

This first version has only the portable layers (new session, rlimits,
wall-clock kill of the whole process group); bubblewrap, the unprivileged uid
and cgroups are added on top of the same interface.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

MiB = 1024 * 1024


@dataclass
class Limits:
    """Resource limits for one sandboxed run."""

    wall_s: float = 300.0
    memory_bytes: int = 6 * 1024 * MiB  # whole job (all ranks)
    nproc: int = 512
    fsize_bytes: int = 256 * MiB
    nofile: int = 1024
    output_bytes: int = 64 * 1024  # kept tail of stdout/stderr
    address_space: bool = True  # RLIMIT_AS per process; never with CUDA
    dump_signal: int | None = None  # sent to the group before a timeout kill
    dump_grace_s: float = 3.0


@dataclass
class SandboxResult:
    """How a sandboxed run ended."""

    returncode: int | None
    timed_out: bool
    wall_s: float
    stdout: str = ""
    stderr: str = ""
    killed_reason: str | None = None  # "timeout", "memory", "pids", ...
    oom_killed: bool = False
    layers: list[str] = field(default_factory=list)
    peak_memory_bytes: int | None = None


def _tail(data: bytes, limit: int) -> str:
    if len(data) > limit:
        data = b"...[truncated]...\n" + data[-limit:]
    return data.decode("utf-8", errors="replace")


def _preexec(limits: Limits):
    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_bytes, limits.fsize_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
        if limits.address_space:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    return apply


def run(argv: Sequence[str], *, workdir: Path, limits: Limits, env: dict[str, str],
        ro_binds: Sequence[tuple[str, str]] = (), rw_binds: Sequence[tuple[str, str]] = (),
        gpus: Sequence[int] | None = None) -> SandboxResult:
    """Run ``argv`` in ``workdir`` under ``limits``; never raises for student behaviour."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_preexec(limits))
    timed_out = False
    try:
        out, err = proc.communicate(timeout=limits.wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        if limits.dump_signal is not None:
            _signal_group(proc.pid, limits.dump_signal)
            time.sleep(limits.dump_grace_s)
        _signal_group(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    _signal_group(proc.pid, signal.SIGKILL)  # nothing outlives the job
    return SandboxResult(
        returncode=proc.returncode, timed_out=timed_out, wall_s=time.monotonic() - start,
        stdout=_tail(out, limits.output_bytes), stderr=_tail(err, limits.output_bytes),
        killed_reason="timeout" if timed_out else None,
        layers=["jobdir", "session", "rlimits", "killpg"],
    )


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
