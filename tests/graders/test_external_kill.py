"""A rank killed from outside the job (the host's OOM killer, an operator's kill -9) is an
infrastructure failure: retried, no attempt used. A rank that kills itself stays the student's.

Real torchrun ranks under the full sandbox; the test plays the operator and SIGKILLs rank 0
from the host, as in the fault run where the reference solution was graded 50/100 for it.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from graders import torchrun, workspace
from graders.exceptions import InfrastructureError

pytestmark = pytest.mark.slow

LOOP = """
import os, signal, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(4)
for step in range(600):
    dist.all_reduce(x)
    if step == 5 and rank == 0 and sys.argv[1:] == ["self"]:
        os.kill(os.getpid(), signal.SIGKILL)  # the student's own doing
    time.sleep(0.05)
dist.destroy_process_group()
"""


def _launch(job: Path, args: list[str]):
    """The script's 2-rank run inside a job folder, as a grader makes it (the job's own sandbox uid)."""
    code = job / "code"
    code.mkdir()
    (code / "loop.py").write_text(LOOP)
    os.chmod(code, 0o755)
    return torchrun.run(code / "loop.py", 2, root=job / "n2", data_dir=code, epochs=0, script_args=args,
                        limits=torchrun.make_limits({"wall_s": 120, "address_space": False}))


def _rank_pid(script: str, rank: int) -> int | None:
    """The rank's own process (its children and the launcher do not run the script with RANK=rank)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and script.encode() in cmd and b"torch.distributed.run" not in cmd:
            return int(entry.name)
    return None


def test_sigkill_from_outside_is_an_infrastructure_failure():
    with workspace.job_dir("killed") as job:
        script = str(job / "code" / "loop.py")

        def operator():
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                pid = _rank_pid(script, 0)
                if pid:
                    time.sleep(2)  # let it train a little
                    os.kill(pid, signal.SIGKILL)
                    return
                time.sleep(0.2)

        killer = threading.Thread(target=operator, daemon=True)
        killer.start()
        with pytest.raises(InfrastructureError, match="killed from outside the job"):
            _launch(job, [])
        killer.join()


def test_a_rank_that_kills_itself_is_graded_as_the_students():
    with workspace.job_dir("suicide") as job:
        run = _launch(job, ["self"])
    assert run.exit_codes.get(0) == -9 and run.ranks[0].of("signal_sent")
