"""What each leased GPU held while a job ran, read by the grader with ``nvidia-smi`` (outside evidence).

Homework 3 limits each rank to the simulated card from inside the student's interpreter (a
per-process memory fraction) and reads torch's allocator statistics there: a script can lift the
fraction and reset or patch the peak it reports. The driver's own count of a card's used memory is
beyond its reach. A job leases its GPUs exclusively (``graders.gpu_slots``), so what a card holds
above its reading before the launch is the job's: the ranks' allocations, plus each process's CUDA
context, NCCL's buffers and the caching allocator's reserve (``CONTEXT_ALLOWANCE`` covers those).

Cards are read by index, not by process: inside containers ``nvidia-smi`` often cannot map a process
to the pids the grader sees, while a card's used memory is always there.
"""
from __future__ import annotations

import shutil
import subprocess

from coursework.report import text
from graders.evidence import SOURCE_OUTSIDE
from graders.evidence.host import Periodic

MiB = 2 ** 20
EVERY_S = 1.0  # one nvidia-smi call a second: about 20-50 ms of a CPU each
# Besides the ranks' tensors a card holds per process a CUDA context (about 0.5 GiB on an H200 with
# torch 2.x), NCCL's buffers and what the caching allocator keeps reserved; a verdict on a card's
# reading allows this much above the simulated capacity, so a correct script near the limit passes.
CONTEXT_ALLOWANCE = 2 * 2 ** 30
QUERY = ["--query-gpu=index,memory.used", "--format=csv,noheader,nounits"]


def query(indices: list[int]) -> dict[int, int] | None:
    """Used bytes of the cards ``indices`` now, or None when ``nvidia-smi`` cannot say."""
    binary = shutil.which("nvidia-smi")
    if not binary:
        return None
    try:
        out = subprocess.run([binary, *QUERY], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    got: dict[int, int] = {}
    for line in out.stdout.splitlines()[:64]:
        index, _, used = line.partition(",")
        try:
            got[int(index)] = int(float(used)) * MiB
        except ValueError:
            continue
    return {i: got[i] for i in indices if i in got} or None


class CardWatch(Periodic):
    """Reads ``indices`` before the launch (idle) and every ``EVERY_S`` until ``stop()``."""

    join_s = 15.0  # one nvidia-smi call may take seconds on a busy driver

    def __init__(self, indices: list[int]):
        super().__init__()
        self.indices = list(indices)
        self.idle = query(self.indices)
        self.peak: dict[int, int] = {}
        if self.idle is not None:
            self.start()

    def interval(self) -> float:
        return EVERY_S

    def sample(self) -> None:
        for i, used in (query(self.indices) or {}).items():
            self.peak[i] = max(used, self.peak.get(i, 0))

    def evidence(self) -> dict:
        """Each card's idle reading, its peak while the job ran and the difference (the job's)."""
        if self.idle is None:
            return {"source": SOURCE_OUTSIDE, "seen": False,
                    "why": text("nvidia-smi 不可用或读不到这些卡", "nvidia-smi is missing or cannot read these cards")}
        return {"source": SOURCE_OUTSIDE, "seen": True,
                "cards": {i: {"idle_bytes": self.idle[i], "peak_bytes": self.peak.get(i, self.idle[i]),
                              "used_bytes": max(0, self.peak.get(i, self.idle[i]) - self.idle[i])}
                          for i in self.idle}}


def over_capacity(evidence: dict | None, capacity: float) -> tuple[int, int] | None:
    """(card index, bytes) of the card that held most above ``capacity`` plus the allowance, else None."""
    if not evidence or not evidence.get("seen"):
        return None
    used = {int(i): int(c.get("used_bytes") or 0) for i, c in (evidence.get("cards") or {}).items()}
    worst = max(used.items(), key=lambda kv: kv[1], default=None)
    if worst and worst[1] > capacity + CONTEXT_ALLOWANCE:
        return worst
    return None
