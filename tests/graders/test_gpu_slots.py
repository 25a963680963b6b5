"""GPU slots: topology parsing and choice as pure functions; allocation with real flocks and processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graders import gpu_slots
from graders.gpu_slots import HostGpus, SlotError, SlotPool, Stopped, choose, parse_topology

# A DGX-1-like host: NVLink within pairs (0,1) (2,3), PCIe switch (PIX) and NICs elsewhere, with colour codes.
TOPO_PAIRS = textwrap.dedent("""\
    \x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
    GPU0\t X \tNV12\tSYS\tSYS\tPIX\t0-15\t0\t\tN/A
    GPU1\tNV12\t X \tSYS\tSYS\tPIX\t0-15\t0\t\tN/A
    GPU2\tSYS\tSYS\t X \tNV12\tSYS\t16-31\t1\t\tN/A
    GPU3\tSYS\tSYS\tNV12\t X \tSYS\t16-31\t1\t\tN/A
    NIC0\tPIX\tPIX\tSYS\tSYS\t X \t\t\t\t

    Legend:

      X    = Self
      SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
      PIX  = Connection traversing at most a single PCIe bridge
      NV#  = Connection traversing a bonded set of # NVLinks
    """)
# A PCIe-only workstation: 0-1 behind one switch, 2-3 behind another, across the host bridge otherwise.
TOPO_PCIE = textwrap.dedent("""\
            GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
    GPU0     X      PIX     PHB     PHB     0-31            N/A
    GPU1    PIX      X      PHB     PHB     0-31            N/A
    GPU2    PHB     PHB      X      PIX     0-31            N/A
    GPU3    PHB     PHB     PIX      X      0-31            N/A
    """)
# An H100 HGX board: every pair on NVSwitch (NV18).
TOPO_NVSWITCH = "\t" + "\t".join(f"GPU{i}" for i in range(8)) + "\tCPU Affinity\n" + "".join(
    f"GPU{i}\t" + "\t".join(" X " if j == i else "NV18" for j in range(8)) + "\t0-63\n" for i in range(8))


def test_parse_topology_reads_nvlink_pcie_and_ignores_nics_and_colours():
    t = parse_topology(TOPO_PAIRS)
    assert t[(0, 1)] == t[(2, 3)] == 112 and t[(0, 2)] == t[(1, 3)] == 10
    assert len(t) == 12  # 4 GPUs, ordered pairs, no NIC
    p = parse_topology(TOPO_PCIE)
    assert p[(0, 1)] == 50 and p[(1, 2)] == 30
    assert parse_topology(TOPO_NVSWITCH)[(3, 7)] == 118
    assert parse_topology("No devices were found") == {}


@pytest.mark.parametrize("topo, free, k, want", [
    (TOPO_PAIRS, [0, 1, 2, 3], 2, [0, 1]),
    (TOPO_PAIRS, [0, 2, 3], 2, [2, 3]),  # the NVLink pair, not the lowest indices
    (TOPO_PAIRS, [1, 2, 3], 1, [1]),  # keep the 2-3 pair whole for a 2-GPU job
    (TOPO_PAIRS, [0, 1, 3], 1, [3]),
    (TOPO_PCIE, [0, 1, 2, 3], 2, [0, 1]),
    (TOPO_PCIE, [1, 2, 3], 2, [2, 3]),  # same PCIe switch beats the host bridge
    (TOPO_NVSWITCH, [5, 6, 7], 2, [5, 6]),
    (None, [3, 1, 2], 2, [1, 2]),  # no topology: lowest indices
    (TOPO_PAIRS, [0, 1], 3, None),  # not enough free
    (TOPO_PAIRS, [0, 1, 2, 3], 4, [0, 1, 2, 3]),
])
def test_choose_prefers_the_closest_gpus(topo, free, k, want):
    assert choose(free, k, parse_topology(topo) if topo else None) == want


def test_host_gpus_from_environment():
    assert gpu_slots.host_gpus({"DISTGRADE_FAKE_GPUS": "4", "WORKER_GPUS": "8"}) == HostGpus(4, True)
    assert gpu_slots.host_gpus({"WORKER_GPUS": "8"}) == HostGpus(8, False)
    with pytest.raises(SlotError):
        gpu_slots.host_gpus({"WORKER_GPUS": "eight"})
    with pytest.raises(SlotError):
        gpu_slots.host_gpus({"WORKER_GPUS": "1000"})
    assert gpu_slots.assigned(2, {"DISTGRADE_GPUS": "5,7"}) == [5, 7]
    assert gpu_slots.assigned(2, {}) == [0, 1]
    assert gpu_slots.available({"DISTGRADE_GPUS": "5,7"}) == 2 and gpu_slots.available({}) is None
    assert gpu_slots.needed("gpu2") == 2 and gpu_slots.needed("cpu") == 0


def test_leases_are_disjoint_and_released(tmp_path):
    pool = SlotPool(tmp_path, HostGpus(4, True))
    a = pool.acquire(2, label="a")
    b = pool.acquire(1, label="b")
    assert not set(a.gpus) & set(b.gpus)
    assert sorted(pool.free()) == sorted(set(range(4)) - set(a.gpus) - set(b.gpus))
    assert "label" not in pool.holders()[a.gpus[0]] and " a " in pool.holders()[a.gpus[0]]
    with pytest.raises(Stopped):
        pool.acquire(2, timeout=0.5, poll=0.05)  # only one free
    a.release()
    with pool.acquire(3, timeout=2) as c:
        assert len(c.gpus) == 3 and not set(c.gpus) & set(b.gpus)
    with pytest.raises(SlotError):
        pool.acquire(5)


HOLDER = """
import sys, time
from graders.gpu_slots import HostGpus, SlotPool
lease = SlotPool(sys.argv[1], HostGpus(int(sys.argv[2]), True)).acquire(int(sys.argv[3]), label=sys.argv[4])
print(",".join(map(str, lease.gpus)), flush=True)
time.sleep(float(sys.argv[5]))
"""


def _holder(slots: Path, count: int, k: int, label: str, hold: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(slots), str(count), str(k), label, str(hold)],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])


def test_sigkilled_holder_releases_its_gpus(tmp_path):
    proc = _holder(tmp_path, 2, 2, "victim", 600)
    assert proc.stdout.readline().strip() == "0,1"
    pool = SlotPool(tmp_path, HostGpus(2, True))
    assert pool.free() == []
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with pool.acquire(2, timeout=5) as lease:  # no lease to expire: the kernel dropped the locks
        assert lease.gpus == [0, 1]


def test_sigkilled_waiter_does_not_block_the_line(tmp_path):
    pool = SlotPool(tmp_path, HostGpus(1, True))
    held = pool.acquire(1)
    waiter = _holder(tmp_path, 1, 1, "waiter", 600)  # takes ticket, waits behind us
    time.sleep(1.0)
    os.kill(waiter.pid, signal.SIGKILL)
    waiter.wait()
    held.release()
    with pool.acquire(1, timeout=5):
        pass


def test_two_gpu_job_is_not_starved_by_one_gpu_jobs(tmp_path):
    """Four 1-GPU jobs keep cycling on 4 GPUs; a 2-GPU job that arrives still gets in quickly."""
    churn = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from graders.gpu_slots import HostGpus, SlotPool
        pool = SlotPool({str(tmp_path)!r}, HostGpus(4, True))
        end = time.monotonic() + 30
        while time.monotonic() < end:
            with pool.acquire(1, poll=0.01):
                time.sleep(0.3)
        """)], cwd=Path(__file__).resolve().parents[2]) for _ in range(4)]
    try:
        time.sleep(2.0)  # all four cycling, never more than 0.3 s apart
        pool = SlotPool(tmp_path, HostGpus(4, True))
        with pool.acquire(2, timeout=10, poll=0.05) as lease:
            assert len(lease.gpus) == 2
            assert lease.waited_s < 5
    finally:
        for p in churn:
            p.kill()
            p.wait()
