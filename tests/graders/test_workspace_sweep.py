"""What a SIGKILLed grader leaves on disk is swept, its sandbox's /etc folder included.

``sandbox_hosts_file`` makes a ``distgrade-sandbox-etc-*`` folder per grader process and removed it
only at exit (atexit), so every grader killed by SIGKILL (a killed worker, every grading replaced
by a newer upload) left one behind, and ``workspace.sweep`` did not look at them. Real processes,
a real kill; a live grader's folder stays.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOLD = ("import sys, time\nfrom graders.sandbox.bwrap import sandbox_hosts_file\n"
        "print(sandbox_hosts_file(), flush=True)\ntime.sleep(120)\n")


def _env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(tmp), DISTGRADE_JOBS_DIR=str(tmp / "jobs"))


def _grader(tmp: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD], cwd=REPO, env=_env(tmp), stdout=subprocess.PIPE, text=True)
    return proc, Path(proc.stdout.readline().strip()).parent


def test_a_killed_graders_sandbox_etc_folder_is_swept_and_a_live_ones_is_not(tmp_path):
    killed, killed_dir = _grader(tmp_path)
    live, live_dir = _grader(tmp_path)
    try:
        assert killed_dir.name.startswith("distgrade-sandbox-etc-") and (killed_dir / "hosts").is_file()
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert killed_dir.exists()  # no exit handler ran
        out = subprocess.run([sys.executable, "-c", "from graders import workspace; print(workspace.sweep())"],
                             cwd=REPO, env=_env(tmp_path), capture_output=True, text=True, check=True).stdout
        assert not killed_dir.exists(), out
        assert (live_dir / "hosts").is_file(), out  # its grader still runs: not swept
    finally:
        live.kill()
        live.wait()
