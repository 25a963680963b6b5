"""GPU slots of one host: a job that needs k GPUs takes k free ones, atomically, and gives them back.

Threat: several RQ workers share one host's GPUs. Without an allocation every job
would train on GPUs 0..k-1 and four workers on an 8-GPU host would share two cards.
So each GPU is a lock file (``gpu-<i>.lock``) in a folder every worker of the host
shares; holding ``flock`` on it *is* holding the GPU. The kernel drops a flock when
its last file descriptor closes, so a SIGKILLed worker (or an OOM-killed grader)
releases its GPUs by dying: there is no lease to expire and nothing to clean up.

Waiters queue in arrival order on the host (a ticket file per waiter, itself held
with flock, so a dead waiter's ticket is skipped): a 2-GPU job at the head of the
line is served as soon as two GPUs are free and 1-GPU jobs behind it cannot keep
taking the one that frees first. It waits only for k free GPUs, never for the host.

Which k GPUs: ``choose`` prefers sets joined by NVLink, then by the closest PCIe
switch, as ``nvidia-smi topo -m`` reports them (``parse_topology``); a 1-GPU job
takes the GPU whose pairing is worst, keeping good pairs free for 2-GPU jobs.

Simulated host (no GPU): ``DISTGRADE_FAKE_GPUS=N`` declares N GPUs; slots are real
lock files and jobs get real indices, but they run in CPU mode.
"""
from __future__ import annotations

import fcntl
import itertools
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from coursework.report import text

# How good a link between two GPUs is, from nvidia-smi's legend (NV<n>: n bonded NVLinks).
LINK_SCORE = {"PIX": 50, "PXB": 40, "PHB": 30, "NODE": 20, "SYS": 10}
_NVLINK = re.compile(r"^NV(\d+)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAX_GPUS = 64  # a declared count beyond this is a typo, not a host


class SlotError(RuntimeError):
    """The host's GPU slots are misconfigured (bad count, unusable folder)."""


class Stopped(Exception):
    """``acquire`` gave up because ``should_stop`` said so (the job was cancelled) or it timed out."""


@dataclass(frozen=True)
class HostGpus:
    """How many GPUs this host offers and whether they are simulated."""

    count: int
    fake: bool = False


def host_gpus(env: Mapping[str, str] | None = None) -> HostGpus:
    """The host's GPUs: ``DISTGRADE_FAKE_GPUS`` (simulated), else ``WORKER_GPUS``, else ``nvidia-smi -L``."""
    env = os.environ if env is None else env
    for name, fake in (("DISTGRADE_FAKE_GPUS", True), ("WORKER_GPUS", False)):
        raw = env.get(name, "").strip()
        if raw:
            try:
                count = int(raw)
            except ValueError:
                raise SlotError(f"{name}={raw!r} is not a number of GPUs") from None
            if not 0 <= count <= MAX_GPUS:
                raise SlotError(f"{name}={count} is outside 0..{MAX_GPUS}")
            return HostGpus(count, fake)
    return HostGpus(detect_gpus(), False)


def detect_gpus() -> int:
    """GPUs that ``nvidia-smi -L`` lists (0 without a driver); never imports torch."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return 0
    try:
        out = subprocess.run([binary, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def read_topology(count: int) -> dict[tuple[int, int], int] | None:
    """This host's link scores from ``nvidia-smi topo -m``, or None (no tool, simulated host)."""
    binary = shutil.which("nvidia-smi")
    if binary is None or count < 2:
        return None
    try:
        out = subprocess.run([binary, "topo", "-m"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_topology(out) or None


def link_score(cell: str) -> int:
    """The score of one ``topo -m`` cell: NVLink beats any PCIe path; unknown is 0."""
    m = _NVLINK.match(cell)
    if m:
        return 100 + int(m.group(1))
    return LINK_SCORE.get(cell, 0)


def parse_topology(text: str) -> dict[tuple[int, int], int]:
    """``{(i, j): score}`` for every GPU pair in ``nvidia-smi topo -m`` output.

    The header names the columns (``GPU0 GPU1 ... NIC0 CPU Affinity``); each ``GPU<i>``
    row has one cell per column. NIC rows and columns, affinity columns, the legend and
    colour codes are ignored.
    """
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    # The header is the first line naming GPU0 that is not GPU0's own row (whose next cell is X).
    header = next((c for ln in lines if (c := ln.split())[:1] == ["GPU0"] and c[1:2] != ["X"]), None)
    if header is None:
        return {}
    columns = [c for c in header if re.fullmatch(r"GPU\d+|NIC\d+|mlx\S+", c)]
    gpu_cols = {i: int(c[3:]) for i, c in enumerate(columns) if c.startswith("GPU")}
    scores: dict[tuple[int, int], int] = {}
    for ln in lines:
        cells = ln.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        row = int(cells[0][3:])
        for col, gpu in gpu_cols.items():
            if col + 1 < len(cells) and gpu != row:
                scores[(row, gpu)] = link_score(cells[col + 1])
    return scores


def choose(free: Sequence[int], k: int, topology: Mapping[tuple[int, int], int] | None = None) -> list[int] | None:
    """Which ``k`` of the ``free`` GPUs to take, or None if fewer than ``k`` are free.

    k >= 2: the set whose weakest pair link is best (then the best total, then the lowest
    indices). k == 1: the GPU whose best link to another free GPU is weakest, so NVLink
    pairs stay whole for the 2-GPU jobs. Without a topology: the lowest indices.
    """
    free = sorted(set(free))
    if k < 1 or len(free) < k:
        return None
    if not topology:
        return free[:k]

    def link(a: int, b: int) -> int:
        return min(topology.get((a, b), 0), topology.get((b, a), 0))

    if k == 1:
        best_partner = {g: max((link(g, o) for o in free if o != g), default=0) for g in free}
        return [min(free, key=lambda g: (best_partner[g], g))]
    best = max(itertools.combinations(free, k),
               key=lambda s: (min(link(a, b) for a, b in itertools.combinations(s, 2)),
                              sum(link(a, b) for a, b in itertools.combinations(s, 2)), [-g for g in s]))
    return list(best)


@dataclass
class Lease:
    """GPUs held by this process (and by any child it passes ``fds`` to); ``release`` gives them back."""

    gpus: list[int]
    fds: list[int] = field(default_factory=list)
    fake: bool = False
    waited_s: float = 0.0

    def release(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)  # closing the last descriptor drops the flock
            except OSError:
                pass
        self.fds = []

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on ``path`` (created 0600), or None if someone holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class SlotPool:
    """The GPU slots of one host, in a folder shared by all its workers."""

    def __init__(self, directory: Path | str, host: HostGpus,
                 topology: Mapping[tuple[int, int], int] | None = None):
        self.dir = Path(directory)
        self.host = host
        self.topology = topology
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise SlotError(f"GPU slot folder {self.dir} is unusable: {exc}") from exc

    def slot_path(self, gpu: int) -> Path:
        return self.dir / f"gpu-{gpu}.lock"

    def free(self) -> list[int]:
        """GPUs nobody holds right now (a snapshot, for status pages)."""
        out = []
        for g in range(self.host.count):
            fd = _try_lock(self.slot_path(g))
            if fd is not None:
                os.close(fd)
                out.append(g)
        return out

    def holders(self) -> dict[int, str]:
        """``{gpu: what its holder wrote}`` for held GPUs (pid and job), for the operator."""
        held = set(range(self.host.count)) - set(self.free())
        out = {}
        for g in sorted(held):
            try:
                out[g] = self.slot_path(g).read_text()[:200]
            except OSError:
                out[g] = ""
        return out

    def acquire(self, k: int, *, label: str = "", should_stop: Callable[[], bool] = lambda: False,
                timeout: float | None = None, poll: float = 0.2) -> Lease:
        """Wait in line for ``k`` free GPUs of this host and hold them; raises ``Stopped`` if told to."""
        if not 1 <= k <= self.host.count:
            raise SlotError(f"a job needs {k} GPU(s); this host has {self.host.count}")
        started = time.monotonic()
        ticket, ticket_fd = self._take_ticket()
        try:
            while True:
                if should_stop() or (timeout is not None and time.monotonic() - started > timeout):
                    raise Stopped(f"gave up waiting for {k} GPU(s)")
                if not self._anyone_ahead(ticket):
                    lease = self._take(k, label)
                    if lease is not None:
                        lease.waited_s = round(time.monotonic() - started, 3)
                        return lease
                time.sleep(poll)
        finally:
            os.close(ticket_fd)
            try:
                os.unlink(self.dir / f"ticket-{ticket:012d}")
            except FileNotFoundError:
                pass

    def _take(self, k: int, label: str) -> Lease | None:
        """Probe every slot once; keep the chosen ``k`` if enough are free, else hold nothing."""
        probed = {g: fd for g in range(self.host.count) if (fd := _try_lock(self.slot_path(g))) is not None}
        pick = choose(list(probed), k, self.topology)
        for g, fd in probed.items():
            if pick is None or g not in pick:
                os.close(fd)
        if pick is None:
            return None
        for g in pick:
            fd = probed[g]
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid={os.getpid()} {label} since={int(time.time())}\n".encode()[:200], 0)
        return Lease(gpus=pick, fds=[probed[g] for g in pick], fake=self.host.fake)

    def _take_ticket(self) -> tuple[int, int]:
        """The next number in this host's line, with its ticket file held (a dead waiter's is skipped)."""
        counter = os.open(self.dir / "tickets", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(counter, fcntl.LOCK_EX)
            raw = os.pread(counter, 32, 0).decode(errors="replace").strip()
            ticket = (int(raw) if raw.isdigit() else 0) + 1
            os.ftruncate(counter, 0)
            os.pwrite(counter, str(ticket).encode(), 0)
            fd = _try_lock(self.dir / f"ticket-{ticket:012d}")
            if fd is None:  # numbers only grow: nobody else can hold this one
                raise SlotError(f"ticket {ticket} is held by another process")
            return ticket, fd
        finally:
            os.close(counter)

    def _anyone_ahead(self, ticket: int) -> bool:
        """Is a live waiter with a lower ticket still in line? Dead waiters' tickets are removed."""
        ahead = False
        for name in os.listdir(self.dir):
            if not name.startswith("ticket-") or not name[7:].isdigit() or int(name[7:]) >= ticket:
                continue
            try:
                fd = _try_lock(self.dir / name)
            except FileNotFoundError:
                continue
            if fd is None:
                ahead = True
                continue
            os.close(fd)  # nobody holds it: its waiter got its GPUs or died
            try:
                os.unlink(self.dir / name)
            except FileNotFoundError:
                pass
        return ahead


def assigned(n: int, env: Mapping[str, str] | None = None) -> list[int]:
    """The host GPU indices a grader should use for an n-process run.

    Inside a job the worker passes what it allocated as ``DISTGRADE_GPUS``; a grader run
    by hand (no worker) uses GPUs 0..n-1 as before.
    """
    env = os.environ if env is None else env
    raw = env.get("DISTGRADE_GPUS", "").strip()
    if not raw:
        return list(range(n))
    gpus = [int(x) for x in raw.split(",") if x.strip().isdigit()]
    return gpus[:n]


def available(env: Mapping[str, str] | None = None) -> int | None:
    """How many GPUs this job was given (``DISTGRADE_GPUS``), or None outside a worker."""
    env = os.environ if env is None else env
    raw = env.get("DISTGRADE_GPUS", "").strip()
    return len([x for x in raw.split(",") if x.strip().isdigit()]) if raw else None


def job_gpus() -> int:
    """The GPUs a GPU-mode grading may use: the ones its worker allocated, or, run by hand outside a
    worker, every GPU torch sees (torch is imported only here, so the CPU grader never pays for it)."""
    given = available()
    if given is not None:
        return given
    import torch

    return torch.cuda.device_count()


def needed(resource: str) -> int:
    """GPUs a queue class needs: ``gpu2`` -> 2, ``cpu`` -> 0."""
    m = re.fullmatch(r"gpu(\d+)", resource or "")
    return int(m.group(1)) if m else 0


def shortfall(nproc: int, available: int) -> dict[str, str] | None:
    """Why this host cannot run an ``nproc``-GPU job (zh and en, for "not run on this host"), or None."""
    if available >= nproc:
        return None
    if available < 1:
        return text(f"本机没有 GPU，需要 {nproc} 块", f"this host has no GPU; {nproc} are needed")
    return text(f"本机只有 {available} 块 GPU，需要 {nproc} 块", f"this host has {available} GPU(s); {nproc} are needed")
