"""The sandbox's two data types: the limits a run gets and the one result it returns."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

MiB = 1024 * 1024


class KilledReason(str, Enum):
    """Why the sandbox (or the kernel on its behalf) ended a run, with how a student reads it.

    Each member is declared as ``(value, zh, en)``: a reason added without its two labels is
    a TypeError when this module loads, so no message can show a bare id."""

    TIMEOUT = ("timeout", "超出时间上限", "timeout")
    MEMORY = ("memory", "超出内存上限", "memory")
    PIDS = ("pids", "超出进程数上限", "pids")
    DISK = ("disk", "超出磁盘上限", "disk")
    OUTPUT = ("output", "输出过多", "output")
    STOPPED = ("stopped", "证据已足够，评分器提前停止", "stopped early by the grader: the evidence was in")

    def __new__(cls, value: str, zh: str, en: str) -> "KilledReason":
        member = str.__new__(cls, value)
        member._value_ = value
        member._label = {"zh": zh, "en": en}
        return member

    @property
    def label(self) -> dict[str, str]:
        """``{"zh": ..., "en": ...}`` for a student's message."""
        return dict(self._label)

    def __str__(self) -> str:  # messages format it: "timeout", never "KilledReason.TIMEOUT"
        return self.value


@dataclass
class Limits:
    """Resource limits for one sandboxed run."""

    wall_s: float = 300.0
    memory_bytes: int = 6 * 1024 * MiB  # whole job (all ranks)
    nproc: int = 512  # tasks (threads count) in the whole job
    fsize_bytes: int = 256 * MiB  # largest single file
    nofile: int = 1024
    output_bytes: int = 64 * 1024  # kept tail of stdout/stderr
    address_space: bool = True  # RLIMIT_AS per process; never with CUDA
    dump_signal: int | None = None  # sent to the group before a timeout kill
    dump_grace_s: float = 3.0
    disk_bytes: int = 2 * 1024 * MiB  # all files in the writable binds, and the private /tmp
    output_kill_bytes: int = 32 * MiB  # stdout+stderr beyond this is a flood: kill
    shm_bytes: int = 256 * MiB  # the private /dev/shm (gloo and DataLoader workers use it)


@dataclass
class SandboxResult:
    """How a sandboxed run ended, and which protections it had (``layers``) or lacked (``degraded``)."""

    returncode: int | None
    timed_out: bool
    wall_s: float
    stdout: str = ""
    stderr: str = ""
    killed_reason: KilledReason | None = None
    oom_killed: bool = False  # by the job's own memory limit
    host_oom: bool = False  # a process of the job killed by the host's OOM killer, the job under its limit
    layers: list[str] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    degraded: list[str] = field(default_factory=list)  # "layer: why it is missing"
    output_total_bytes: int = 0  # stdout+stderr produced, kept or not
    leftover_pids: int = 0  # processes that survived the final kill (should be 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (the kill reason as its string)."""
        d = asdict(self)
        d["killed_reason"] = self.killed_reason.value if self.killed_reason else None
        return d
