"""Run a script under the harness's ``Observer`` in a fresh interpreter, for the harness's own tests.

Installing the observer patches torch for the whole interpreter, so each case runs in a subprocess.
A script is ``PRELUDE`` + its body: the harness is on ``sys.path``, ``stream`` keeps every record sent
(``stream.recs``), ``obs`` is the installed observer, and the script's own arguments are ``sys.argv[2:]``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HARNESS_DIR = Path(__file__).resolve().parents[2] / "graders" / "harness"

PRELUDE = r'''
import json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import torch
from distgrade_harness import hooks

class S:
    pid = os.getpid()
    def __init__(self): self.recs = []
    def send(self, r): self.recs.append(r)
    def close(self): pass

stream = S()
obs = hooks.Observer(stream, 0)
obs.install()
'''


def run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess:
    """``PRELUDE + body`` run in ``tmp_path`` (what the harness writes lands there); it must exit 0."""
    script = tmp_path / "observed.py"
    script.write_text(PRELUDE + body)
    out = subprocess.run([sys.executable, str(script), str(HARNESS_DIR), *args], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def last_json(tmp_path: Path, body: str, *args: str) -> Any:
    """The JSON the script prints last."""
    return json.loads(run(tmp_path, body, *args).stdout.strip().splitlines()[-1])
