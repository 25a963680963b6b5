"""Per-rank messages from what PyTorch itself prints about a desync or a stuck collective.

Graded jobs run with ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (see ``graders.torchrun.rank_env``):
every collective is first checked across ranks, and a mismatch raises at once with

    Detected mismatch between collectives on ranks. Rank 0 is running collective:
    CollectiveFingerPrint(SequenceNumber=3, OpType=BROADCAST, TensorShape=[10], ...), but
    Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE, ...)

instead of hanging until the wall clock. On NCCL the watchdog reports a stuck collective as
``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, ...)``
(and, with the flight recorder on, dumps its trace). ``explain`` turns either into one
sentence a student can act on: "rank 1 called all_reduce with shape [10] while rank 0
called broadcast with shape [10]". The text comes from student processes: it is only
matched with bounded regexes and never used as a format string.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_SCAN = 64 * 1024  # characters of a log searched; the message comes early in a traceback
_OPS = {"ALLREDUCE": "all_reduce", "BROADCAST": "broadcast", "BARRIER": "barrier", "ALLGATHER": "all_gather",
        "_ALLGATHER_BASE": "all_gather_into_tensor", "ALLGATHER_COALESCED": "all_gather_coalesced",
        "REDUCE_SCATTER": "reduce_scatter", "_REDUCE_SCATTER_BASE": "reduce_scatter_tensor",
        "ALLTOALL": "all_to_all", "ALLTOALL_BASE": "all_to_all_single", "GATHER": "gather", "SCATTER": "scatter",
        "REDUCE": "reduce", "SEND": "send", "RECV": "recv", "RECVANYSOURCE": "recv", "COALESCED": "coalesced ops"}
_SIDE = re.compile(r"Rank (\d{1,5}) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d{1,12}), "
                   r"OpType=(\w{1,40})(?:, TensorShape=\[([\d, ]{0,200})\])?(?:, TensorDtypes=(\w{1,40}))?")
_MISMATCH = re.compile(r"Detected mismatch between collectives on ranks\.")
_WATCHDOG = re.compile(r"\[Rank (\d{1,5})\][^\n]{0,200}?Watchdog caught collective operation timeout: "
                       r"WorkNCCL\(SeqNum=(\d{1,12}), OpType=(\w{1,40})[^)\n]{0,300}?Timeout\(ms\)=(\d{1,12})")


@dataclass(frozen=True)
class RankCall:
    """One rank's collective as PyTorch fingerprinted it."""

    rank: int
    op: str
    seq: int
    shape: str | None = None
    dtype: str | None = None

    def describe(self) -> str:
        shape = f" with shape [{self.shape}]" if self.shape is not None else ""
        return f"rank {self.rank} called {self.op}{shape}"


def op_name(raw: str) -> str:
    """``ALLREDUCE`` -> ``all_reduce`` (the torch.distributed function a student wrote)."""
    return _OPS.get(raw.upper(), raw.lower())


def mismatch(text: str) -> tuple[RankCall, RankCall] | None:
    """The two ranks' collectives of the first DETAIL mismatch in ``text``, or None."""
    text = text[:MAX_SCAN]
    m = _MISMATCH.search(text)
    if not m:
        return None
    sides = list(_SIDE.finditer(text, m.end(), m.end() + 4000))[:2]
    if len(sides) < 2:
        return None
    calls = tuple(RankCall(int(s.group(1)), op_name(s.group(3)), int(s.group(2)),
                           " ".join(s.group(4).split()) if s.group(4) is not None else None, s.group(5))
                  for s in sides)
    return calls[0], calls[1]


def timeouts(text: str) -> list[RankCall]:
    """Collectives the NCCL watchdog reported as timed out, one per rank."""
    out: dict[int, RankCall] = {}
    for m in _WATCHDOG.finditer(text[:MAX_SCAN]):
        out.setdefault(int(m.group(1)), RankCall(int(m.group(1)), op_name(m.group(3)), int(m.group(2))))
    return [out[r] for r in sorted(out)]


def explain(text: str) -> dict[str, str] | None:
    """A bilingual sentence for the first desync or watchdog timeout in ``text``, or None."""
    pair = mismatch(text)
    if pair:
        a, b = sorted(pair, key=lambda c: c.rank, reverse=True)  # "rank 1 ... while rank 0 ..."
        same_op = a.op == b.op
        en = f"{a.describe()} while {b.describe()}"
        zh = (f"rank {a.rank} 调用了 {a.op}" + (f"（形状 [{a.shape}]）" if a.shape is not None else "")
              + f"，而 rank {b.rank} 调用了 {b.op}" + (f"（形状 [{b.shape}]）" if b.shape is not None else ""))
        if a.seq != b.seq:
            en += f" (collective #{a.seq} vs #{b.seq}: one rank called more collectives than the other)"
            zh += f"（第 {a.seq} 次与第 {b.seq} 次集合通信：某个 rank 多调用了集合通信）"
        elif same_op:
            en += " (same collective, different tensors)"
            zh += "（同一种集合通信，但张量不同）"
        return {"en": en, "zh": zh}
    stuck = timeouts(text)
    if stuck:
        en = "; ".join(f"rank {c.rank} waited too long in {c.op} (collective #{c.seq})" for c in stuck)
        zh = "；".join(f"rank {c.rank} 在 {c.op}（第 {c.seq} 次集合通信）中等待超时" for c in stuck)
        return {"en": en, "zh": zh}
    return None


# ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` SIGSEGVs every rank at DDP construction with torch 2.13.0+cpu
# (gloo), so it is used only where this probe (a 2-rank DDP step under DETAIL) passes on the host's
# own torch. The answer is cached per torch version in the var folder.
_PROBE = """
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
DDP(nn.Linear(4, 2))(torch.randn(3, 4)).sum().backward()
dist.destroy_process_group()
print("ok", flush=True)
"""


def detail_works(var_dir: str | os.PathLike[str], timeout: float = 120.0) -> bool:
    """Does DDP survive ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` with this host's torch? (cached)"""
    import importlib.metadata

    version = importlib.metadata.version("torch")
    cache = Path(var_dir) / "dist-debug" / f"detail-torch-{re.sub(r'[^0-9A-Za-z.+_-]', '_', version)}.json"
    try:
        return bool(json.loads(cache.read_text())["works"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with tempfile.TemporaryDirectory(prefix="distgrade-detail-") as tmp:
        script = Path(tmp) / "probe.py"
        script.write_text(_PROBE)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
               "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "HOME": tmp}
        try:
            proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                   "--nproc_per_node=2", str(script)], cwd=tmp, env=env, capture_output=True,
                                  text=True, timeout=timeout)
            works = proc.returncode == 0 and proc.stdout.count("ok") == 2
        except subprocess.TimeoutExpired:
            works = False
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"torch": version, "works": works}))
    except OSError:
        pass
    return works
