"""A rank runs as a uid no passwd file names; code that asks who it is must still work.

On the first GPU host every graded run crashed in ``DDP(...)`` and in ``AdamW(...)``: torch
2.11 imports ``torch._dynamo``, which names its cache folder after ``getpass.getuser()``,
and the job's uid has no passwd entry (``KeyError: 'getpwuid(): uid not found: 60100'``).
A student's ``getpass.getuser()`` or ``torch.compile`` meets the same wall on any host.
"""
from __future__ import annotations

import os
import pytest

from graders import torchrun, workspace

pytestmark = pytest.mark.slow

SCRIPT = """
import getpass, os, torch.distributed as dist
from torch._inductor.runtime.cache_dir_utils import cache_dir
dist.init_process_group("gloo")
print("user=" + getpass.getuser(), "cache=" + cache_dir(), flush=True)
dist.destroy_process_group()
"""


def test_getuser_and_the_compile_cache_work_as_the_job_uid() -> None:
    with workspace.job_dir("who") as job:
        code = job / "code"
        code.mkdir()
        (code / "who.py").write_text(SCRIPT)
        os.chmod(code, 0o755)
        run = torchrun.run(code / "who.py", 1, root=job / "n1", data_dir=code, epochs=0, script_args=[],
                           limits=torchrun.make_limits({"wall_s": 120, "address_space": False}))
    log = run.scan_logs["rank0"]
    assert run.result.returncode == 0, log[-2000:]
    assert "user=" in log and "KeyError" not in log
    cache = log.split("cache=", 1)[1].split()[0]
    assert cache.startswith(str(job / "n1" / "work")), cache  # the job's own folder, removed with it
