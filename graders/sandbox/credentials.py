"""Who student code runs as: a uid of its own per concurrent job, rlimits, a scrubbed environment.

One uid per job, not one for all: RLIMIT_NPROC counts per uid, signals and ``/proc`` follow
the uid, and so do files left in a shared ``/tmp``. A job takes a *slot* (a uid from
``DISTGRADE_SANDBOX_UIDS``, default 60100-60163) by holding an ``flock`` on that uid's
lock file; the kernel drops the lock when the holder dies, even by SIGKILL, so a crashed
worker never leaks a slot. Taking a slot and giving it back both *reap* the uid: every
process it still runs is killed and every file it owns in the host's ``/tmp``,
``/var/tmp`` and ``/dev/shm`` is removed (the jobs root excepted: the grader reads the job's own files there).

A slot taken by ``workspace.job_dir`` is the job's for every run in that thread (a context
variable), and handed to child processes that run sandboxes (the notebook kernel launcher) in
``DISTGRADE_SANDBOX_UID`` (``child_env``); a uid set there is used as it is, unlocked.
The slot number also picks the job's CPUs (``DISTGRADE_JOB_CPUS`` per job, see ``job_cpus``).
"""
from __future__ import annotations

import contextlib
import contextvars
import fcntl
import os
import re
import resource
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from graders.exceptions import SandboxSetupError
from graders.jobs_root import JOBS_ROOT
from graders.sandbox.result import Limits

DEFAULT_UIDS = "60100-60163"
# Service secrets that a caller passing ``dict(os.environ)`` would otherwise hand to students.
SECRET_ENV = re.compile(r"SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|API_KEY|PRIVATE|^DATABASE_URL$"
                        r"|^REDIS_URL$|^AWS_|^RQ_", re.IGNORECASE)
SCRATCH = ("/tmp", "/dev/shm", "/var/tmp")  # host folders a run without private ones may litter
MAX_SCAN = 100_000  # entries looked at per scratch folder when reaping


@dataclass(frozen=True)
class Slot:
    """The uid (and gid, the same number) a job's student code runs as; ``index`` in the range."""

    uid: int
    index: int
    locked: bool  # False: pinned by the environment, someone else holds (or needs no) lock

    @property
    def gid(self) -> int:
        return int(os.environ.get("DISTGRADE_SANDBOX_GID", self.uid))


_JOB_SLOT: contextvars.ContextVar[Slot | None] = contextvars.ContextVar("distgrade_job_slot", default=None)


def child_env(slot: Slot | None) -> dict[str, str]:
    """Environment that hands a job's slot to a child process it starts (the notebook kernel launcher)."""
    return {"DISTGRADE_SANDBOX_UID": str(slot.uid), "DISTGRADE_SANDBOX_SLOT": str(slot.index)} if slot else {}


def uid_range() -> list[int]:
    """The uids jobs may use, from ``DISTGRADE_SANDBOX_UIDS`` (``first-last``)."""
    raw = os.environ.get("DISTGRADE_SANDBOX_UIDS", DEFAULT_UIDS)
    try:
        first, last = (int(x) for x in raw.split("-", 1))
    except ValueError:
        raise SandboxSetupError(f"DISTGRADE_SANDBOX_UIDS={raw!r} is not FIRST-LAST") from None
    if not 1000 <= first <= last:
        raise SandboxSetupError(f"DISTGRADE_SANDBOX_UIDS={raw!r}: uids must be >= 1000, first <= last")
    return list(range(first, last + 1))


def pinned() -> Slot | None:
    """The slot of the job this code runs in (``lease(job=True)``), else the uid fixed by
    ``DISTGRADE_SANDBOX_UID`` (an operator's choice, or a parent job's slot handed to a child)."""
    slot = _JOB_SLOT.get()
    if slot is not None:
        return slot
    return _env_pin()


def _env_pin() -> Slot | None:
    raw = os.environ.get("DISTGRADE_SANDBOX_UID")
    if not raw:
        return None
    uid = int(raw)
    return Slot(uid, int(os.environ.get("DISTGRADE_SANDBOX_SLOT", "0")), locked=False)


def current_uid() -> int:
    """The uid student code of this job runs as (the first of the range outside any job)."""
    slot = pinned()
    return slot.uid if slot else uid_range()[0]


def lock_dir() -> Path:
    """A root-only folder for the slot locks (nobody else may create or swap a lock file)."""
    path = Path(os.environ.get("DISTGRADE_LOCK_DIR") or Path(tempfile.gettempdir()) / "distgrade-locks")
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxSetupError(f"{path} must be a folder of uid {os.geteuid()} that only it can write")
    return path


@contextlib.contextmanager
def lease(job: bool = False) -> Iterator[Slot | None]:
    """Hold a free slot for the duration (None when not root: there is no uid to drop to).

    ``job=True`` (``workspace.job_dir``): always a fresh slot, which every run of this job in
    this thread then uses (``pinned``). Otherwise (a run) the job's slot or the environment's
    pin is yielded as it is, its owner reaping it, and a fresh slot only outside any job.
    """
    if os.geteuid() != 0:
        yield None
        return
    slot = _env_pin() if job else pinned()
    if slot is not None:
        yield slot
        return
    folder, uids = lock_dir(), uid_range()
    for index, uid in enumerate(uids):
        fd = os.open(folder / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        break
    else:
        raise SandboxSetupError(f"all {len(uids)} sandbox uids ({uids[0]}-{uids[-1]}) are busy; "
                                f"widen DISTGRADE_SANDBOX_UIDS")
    slot = Slot(uid, index, locked=True)
    token = _JOB_SLOT.set(slot) if job else None
    try:
        reap(uid)  # whatever a SIGKILLed predecessor left
        yield slot
    finally:
        if token is not None:
            _JOB_SLOT.reset(token)
        reap(uid)
        os.close(fd)  # releases the flock


def processes_of(uid: int) -> list[int]:
    """Live pids whose real, effective or saved uid is ``uid`` (zombies, already dead, excluded)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"State:") and line.split()[1:2] in ([b"Z"], [b"X"]):
                        break
                    if line.startswith(b"Uid:"):
                        if str(uid).encode() in line.split()[1:4]:
                            found.append(int(entry.name))
                        break
        except OSError:
            continue
    return found


def kill_uid(uid: int, wait_s: float = 5.0) -> int:
    """SIGKILL every process of ``uid`` until none is left; returns how many survived."""
    deadline = time.monotonic() + wait_s
    while True:
        pids = processes_of(uid)
        if not pids or time.monotonic() > deadline:
            return len(pids)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def remove_files_of(uid: int, roots: Sequence[str] = SCRATCH, keep: Sequence[Path] = ()) -> int:
    """Delete what ``uid`` owns under ``roots`` (never following links, never inside ``keep``).

    Another uid can only create entries in world-writable folders or in folders of its own,
    so only world-writable folders are descended into, and the uid's own ones are removed
    whole: the scan stays cheap however much the host keeps in /tmp.
    """
    removed = 0
    keep_real = [str(Path(k).resolve()) for k in keep]
    for root in roots:
        stack, seen = [root], 0
        while stack and seen < MAX_SCAN:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for e in entries:
                seen += 1
                if any(e.path == k or e.path.startswith(k + "/") for k in keep_real):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                is_dir = stat.S_ISDIR(st.st_mode)
                if st.st_uid == uid:
                    removed += 1
                    if is_dir:
                        shutil.rmtree(e.path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(e.path)
                elif is_dir and st.st_mode & 0o002:
                    stack.append(e.path)
    return removed


def reap(uid: int) -> None:
    """Kill the uid's processes, then remove its files from the host's scratch folders."""
    kill_uid(uid)
    remove_files_of(uid, keep=[JOBS_ROOT])


def job_cpus(slot: Slot | None) -> tuple[list[int] | None, str | None]:
    """The CPUs of the job in ``slot`` and, when they are not its own, why.

    ``DISTGRADE_JOB_CPUS=k`` gives slot i the CPUs ``k*i .. k*i+k-1`` of those this process
    may use; slots beyond the machine's share CPUs with others, which is reported.
    """
    raw = os.environ.get("DISTGRADE_JOB_CPUS")
    if not raw:
        return None, "cpus: shared with every other job (DISTGRADE_JOB_CPUS not set)"
    allowed = sorted(os.sched_getaffinity(0))
    k = max(1, min(int(raw), len(allowed)))
    index = slot.index if slot else 0
    start = index * k
    cpus = [allowed[(start + j) % len(allowed)] for j in range(k)]
    if start + k > len(allowed):
        return cpus, f"cpus: slot {index} shares CPUs {cpus} with another job ({len(allowed)} CPUs, {k} per job)"
    return cpus, None


def scrub_env(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Drop variables that look like service secrets; returns the env and the dropped names."""
    dropped = sorted(k for k in env if SECRET_ENV.search(k))
    return {k: v for k, v in env.items() if k not in dropped}, dropped


def preexec(limits: Limits, procs_files: list[str], slot: Slot | None, use_as: bool,
            nproc_rlimit: int, cpus: list[int] | None = None) -> Callable[[], None]:
    """What the child does between fork and exec: session, cgroup, rlimits, CPUs, uid drop."""
    def apply() -> None:
        os.setsid()
        for f in procs_files:  # join the job's cgroup(s) while still root, before any fork
            with open(f, "w") as fh:
                fh.write(str(os.getpid()))
        if cpus:
            os.sched_setaffinity(0, cpus)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_bytes, limits.fsize_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc_rlimit, nproc_rlimit))
        if use_as:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        if slot is not None:
            os.setgroups([])
            os.setgid(slot.gid)
            os.setuid(slot.uid)
            os.umask(0o022)
    return apply


def share_with_uid(slot: Slot, paths: Sequence[Path], writable: Sequence[Path]) -> None:
    """Let the sandbox uid reach the bound paths and write the writable ones.

    Job folders are 0700 (workspace.job_dir); bwrap runs as the sandbox uid and needs
    search permission on every ancestor of a bind source. Only ancestors inside the
    temp dir or the jobs root are opened (o+x: traverse, not list); anything else that
    blocks the way is a deployment error.
    """
    opened = [Path(tempfile.gettempdir()).resolve(), JOBS_ROOT.resolve()]
    for w in writable:
        os.chown(w, slot.uid, slot.gid)
    for p in paths:
        for anc in Path(p).resolve().parents:
            st = anc.stat()
            if st.st_mode & 0o001 or st.st_uid == slot.uid:
                continue
            if any(anc == o or o in anc.parents for o in opened):
                os.chmod(anc, (st.st_mode & 0o7777) | 0o001)
            else:
                raise SandboxSetupError(f"{anc} is not searchable by uid {slot.uid}; "
                                        f"cannot bind {p} into the sandbox")
