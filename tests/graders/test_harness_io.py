"""The rank harness counting a script's own print() and logging output, in a real interpreter.

One rank's harness is started the way torchrun would start it (PYTHONPATH, RANK, the
channel) without torchrun, and reports over a real ChannelServer.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from graders.torchrun import HARNESS_DIR, ChannelServer

SCRIPT = """
import logging
logging.basicConfig(level=logging.INFO)
log = logging.getLogger("train")
for step in range(7):
    log.info("step %d", step)
logging.debug("below the level: never emitted, not counted")
logging.captureWarnings(True)
import warnings
warnings.warn("logged by the logging package itself: a library record, not counted")
print("epoch 0 done")
"""


def test_logging_records_count_like_prints(tmp_path: Path) -> None:
    server = ChannelServer(tmp_path / "chan", 1)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(HARNESS_DIR), "DISTGRADE_CHANNEL": str(server.dir), "RANK": "0",
           "WORLD_SIZE": "1", "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("DISTGRADE_HARNESS_OWNER", None)
    try:
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    prints = server.streams[0].first("prints")
    assert (prints["count"], prints["logging"]) == (1, 7)
