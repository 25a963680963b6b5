"""What the host sees of a run while it runs: CPU time and loopback traffic of each rank's process.

Each rank's pid comes from the kernel (``SO_PEERCRED`` of its channel connection, taken before
student code runs), not from anything the rank says. A sampler thread reads ``/proc/<pid>/stat``
(CPU time of the rank and of its waited-for children) and ``/proc/<pid>/net/dev`` (the counters
of the rank's network namespace) every ``EVERY_S``; the last reading before a process ends is
kept, so at most that interval of its end is missed.

Loopback bytes mean something only inside the job's own network namespace (bubblewrap's
``--unshare-net``), where the only traffic is the job's: gloo's TCP connections between ranks
and its rendezvous store. Outside one, or with NCCL on GPUs (NVLink, PCIe or shared memory,
which no counter here sees), the traffic is reported as not seen and judged from other evidence.

The same reading takes the offset of each rank's stdout and stderr (``/proc/<pid>/fdinfo/1`` and ``2``,
only while the descriptor is still torchrun's capture file of that rank): the most bytes the rank had
written there. A rank can cut the file it writes to (``os.ftruncate(1, 0)``) and leave the launcher's
capture empty; it cannot take back how far its descriptor moved while the grader watched.
"""
from __future__ import annotations

import os
import threading

from coursework.report import text
from graders.evidence import SOURCE_OUTSIDE

EVERY_S = 0.5
_TICK = os.sysconf("SC_CLK_TCK")


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(65536).decode("ascii", "replace")
    except OSError:
        return None


def cpu_seconds(pid: int) -> float | None:
    """utime + stime + cutime + cstime of ``pid`` in seconds."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw or ")" not in raw:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    try:
        return sum(int(x) for x in fields[11:15]) / _TICK
    except (ValueError, IndexError):
        return None


def loopback_bytes(pid: int) -> int | None:
    """Bytes sent on ``lo`` in the network namespace of ``pid``."""
    raw = _read(f"/proc/{pid}/net/dev")
    for line in (raw or "").splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            cols = rest.split()
            try:
                return int(cols[8])  # transmit bytes (on lo every byte sent is also received)
            except (ValueError, IndexError):
                return None
    return None


def output_offset(pid: int, fd: int, folder: str, ending: str) -> int | None:
    """How far ``pid``'s descriptor ``fd`` has written, where it is still a file under ``folder`` whose path ends
    with ``ending`` (torchrun's capture of that rank); None otherwise (a descriptor moved elsewhere, a deleted file)."""
    try:
        link = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    if not (link.startswith(folder.rstrip("/") + "/") and link.endswith(ending)):
        return None
    for line in (_read(f"/proc/{pid}/fdinfo/{fd}") or "").splitlines():
        if line.startswith("pos:"):
            try:
                return int(line.split()[1])
            except (ValueError, IndexError):
                return None
    return None


def own_netns(pid: int) -> bool:
    """Whether ``pid`` lives in a network namespace other than the grader's."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError:
        return False


class Periodic(threading.Thread):
    """Calls ``sample()`` every ``interval()`` seconds until ``stop()``, and once more at the end (the
    last reading before a process ends is kept). Shared by the samplers of ``graders.evidence``."""

    join_s = 5.0

    def __init__(self):
        super().__init__(daemon=True)
        self._done = threading.Event()

    def interval(self) -> float:
        return EVERY_S

    def sample(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.interval())
        self.sample()

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join(timeout=self.join_s)


class Sampler(Periodic):
    """Samples ``pids()`` (rank -> pid) until ``stop()``; then ``evidence(wall_s)``."""

    def __init__(self, pids, gpu: bool = False, logs: str | None = None):
        super().__init__()
        self.pids, self.gpu = pids, gpu
        self.logs = logs  # torchrun's --log-dir: <logs>/<run id>/attempt_0/<rank>/std{out,err}.log
        self.reached: dict[int, dict[str, int]] = {}
        self.cpu: dict[int, float] = {}
        self.lo_first: int | None = None
        self.lo_last: int | None = None
        self.netns: bool | None = None
        self.start()

    def sample(self) -> None:
        for rank, pid in list(self.pids().items()):
            cpu = cpu_seconds(pid)
            if cpu is not None:
                self.cpu[rank] = max(cpu, self.cpu.get(rank, 0.0))
            lo = loopback_bytes(pid)
            if lo is not None:
                if self.netns is None:
                    self.netns = own_netns(pid)
                if self.lo_first is None:
                    self.lo_first = lo
                self.lo_last = max(lo, self.lo_last or 0)
            for fd, kind in ((1, "stdout"), (2, "stderr")):
                pos = output_offset(pid, fd, self.logs, f"/attempt_0/{rank}/{kind}.log") if self.logs else None
                if pos is not None:
                    mine = self.reached.setdefault(rank, {})
                    mine[kind] = max(pos, mine.get(kind, 0))


    def evidence(self, wall_s: float) -> dict:
        """The readings as report evidence; traffic only where it means something."""
        out = {"source": SOURCE_OUTSIDE, "wall_s": round(wall_s, 3),
               "cpu_s": {r: round(c, 2) for r, c in sorted(self.cpu.items())},
               "cpu_total_s": round(sum(self.cpu.values()), 2),
               "output_reached": {r: dict(kinds) for r, kinds in sorted(self.reached.items())}}
        if self.gpu:
            out["loopback"] = {"seen": False, "why": text("NCCL 经 NVLink、PCIe 或共享内存传数据，本机的计数器看不到",
                                                          "NCCL moves data over NVLink, PCIe or shared memory, "
                                                          "which no host counter here sees")}
        elif not self.netns:
            out["loopback"] = {"seen": False, "why": text("这次运行没有自己的网络命名空间", "the run had no network namespace of its own")}
        elif self.lo_last is None:
            out["loopback"] = {"seen": False, "why": text("没有 rank 连上评分程序", "no rank connected to the grader")}
        else:
            out["loopback"] = {"seen": True, "bytes": self.lo_last - (self.lo_first or 0),
                               "why": text("作业自己网络命名空间里 gloo 的 TCP 流量（从第一个 rank 连上评分程序算起）",
                                           "gloo's TCP traffic in the job's own network namespace (after the first "
                                           "rank connected to the grader)")}
        return out
