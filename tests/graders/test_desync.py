"""Desync diagnosis: PyTorch's own DETAIL mismatch message, produced for real with gloo, as per-rank sentences."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from graders import desync

FP = ("CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, TensorShape=[{shape}], TensorDtypes=Float, "
      "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), "
      "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))")


def detail(r1, op1, seq1, shape1, r2, op2, seq2, shape2) -> str:
    """The message as torch 2.13's ProcessGroupWrapper words it (captured from a real run)."""
    return ("RuntimeError: Detected mismatch between collectives on ranks. Rank " + str(r1)
            + " is running collective: " + FP.format(seq=seq1, op=op1, shape=shape1) + ", but Rank " + str(r2)
            + " is running collective: " + FP.format(seq=seq2, op=op2, shape=shape2)
            + ".Collectives differ in the following aspects: \t Op type: " + op1 + "vs " + op2)


@pytest.mark.parametrize("text, en", [
    (detail(0, "BROADCAST", 0, "10", 1, "ALLREDUCE", 0, "10"),
     "rank 1 called all_reduce with shape [10] while rank 0 called broadcast with shape [10]"),
    (detail(1, "ALLREDUCE", 4, "10", 0, "ALLREDUCE", 4, "12"),
     "rank 1 called all_reduce with shape [10] while rank 0 called all_reduce with shape [12] "
     "(same collective, different tensors)"),
    (detail(1, "BARRIER", 7, "1", 0, "ALLREDUCE", 6, "4, 3"),
     "rank 1 called barrier with shape [1] while rank 0 called all_reduce with shape [4, 3] "
     "(collective #7 vs #6: one rank called more collectives than the other)"),
])
def test_explain_detail_mismatch(text, en):
    out = desync.explain("[rank1]: Traceback ...\n" + text)
    assert out["en"] == en and "rank" in out["zh"]


def test_explain_nccl_watchdog_timeout():
    text = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
            "NumelIn=10, NumelOut=10, Timeout(ms)=60000) ran for 60003 milliseconds before timing out.\n"
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, "
            "NumelIn=10, NumelOut=10, Timeout(ms)=60000) ran for 60001 milliseconds before timing out.\n")
    assert desync.explain(text)["en"] == ("rank 0 waited too long in broadcast (collective #5); "
                                          "rank 1 waited too long in all_reduce (collective #5)")


def test_hostile_text_is_bounded_and_harmless():
    assert desync.explain("") is None
    assert desync.explain("Detected mismatch between collectives on ranks. {0.__class__} %s" * 10000) is None
    assert desync.explain("x" * 10_000_000 + detail(0, "BROADCAST", 0, "10", 1, "ALLREDUCE", 0, "10")) is None


MISMATCH = textwrap.dedent("""
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(10)
    dist.broadcast(t, 0) if dist.get_rank() == 0 else dist.all_reduce(t)
    """)


@pytest.mark.slow
def test_real_gloo_detail_mismatch_is_explained(tmp_path):
    script = tmp_path / "mismatch.py"
    script.write_text(MISMATCH)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "OMP_NUM_THREADS": "1"})
    assert proc.returncode != 0  # with DETAIL the desync raises at once instead of hanging
    assert desync.explain(proc.stdout + proc.stderr)["en"] == \
        "rank 1 called all_reduce with shape [10] while rank 0 called broadcast with shape [10]"
