"""While torchrun runs, the status page gets each rank's log lines (not only at the end)."""
from __future__ import annotations

import json
import time

from graders import torchrun

SCRIPT = """
import os, sys, time
rank = os.environ.get("RANK", "?")
for i in range(6):
    print(f"rank {rank} step {i}", flush=True)
    time.sleep(1)
"""


def test_rank_logs_reach_the_progress_file_while_the_job_runs(tmp_path, monkeypatch):
    progress = tmp_path / "progress.json"
    monkeypatch.setenv("DISTGRADE_PROGRESS_FILE", str(progress))
    monkeypatch.setattr(torchrun, "PROGRESS_EVERY_S", 0.5)
    script_dir = tmp_path / "code"
    script_dir.mkdir()
    (script_dir / "train.py").write_text(SCRIPT)
    for p in (tmp_path, script_dir, script_dir / "train.py"):
        p.chmod(0o755)
    seen: list[dict] = []

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (seen and "step 5" in json.dumps(seen[-1])):
            if progress.exists():
                seen.append(json.loads(progress.read_text()))
            time.sleep(0.3)

    import threading
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    run = torchrun.run(script_dir / "train.py", 2, root=tmp_path / "job", data_dir=script_dir, epochs=0,
                       limits=torchrun.make_limits({"wall_s": 60}), script_args=[], progress="run.distributed")
    watcher.join(timeout=5)
    assert run.result.returncode == 0, run.logs
    during = [s for s in seen if s["phase"] == "run.distributed" and "step" in json.dumps(s["logs"])]
    assert during, seen[-3:]
    first = during[0]["logs"]
    assert set(first) == {"n2.rank0", "n2.rank1"} and "step 5" not in json.dumps(first)  # seen mid-run
