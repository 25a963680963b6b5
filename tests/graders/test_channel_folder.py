"""Student code cannot delete or replace the grader's record socket (sticky channel folder)."""
from __future__ import annotations

from graders import torchrun

SCRIPT = """
import os, socket
chan = os.environ["DISTGRADE_CHANNEL"]
try:
    os.unlink(os.path.join(chan, "sock"))
    print("UNLINKED", flush=True)
except OSError as e:
    print("REFUSED", type(e).__name__, flush=True)
try:
    os.rename(os.path.join(chan, "sock"), os.path.join(chan, "moved"))
    print("RENAMED", flush=True)
except OSError as e:
    print("REFUSED", type(e).__name__, flush=True)
"""


def test_rank_cannot_remove_or_move_the_grader_socket(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(SCRIPT)
    for p in (tmp_path, code, code / "train.py"):
        p.chmod(0o755)
    run = torchrun.run(code / "train.py", 1, root=tmp_path / "job", data_dir=code, epochs=0,
                       limits=torchrun.make_limits({"wall_s": 60}), script_args=[])
    log = run.logs["rank0"]
    assert log.count("REFUSED PermissionError") == 2, log
    assert "UNLINKED" not in log and "RENAMED" not in log
