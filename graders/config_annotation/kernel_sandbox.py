"""Kernel launcher: nbgrader starts this (through a kernelspec) instead of ipykernel.

``python -m graders.config_annotation.kernel_sandbox -f CONNECTION_FILE [ipykernel args]``

nbgrader, nbclient and the gradebook stay in the grader process; only the kernel, which runs
the student's cells, goes into ``graders.sandbox`` with the job's outer wall-clock limit and
the sandbox's allow-list: the answer key, the catalogue and the graders are out of its sight. The
notebook's test cells only check each answer's format; the scores are computed outside the
sandbox on the answers read from the upload (``notebook.py``).
The kernel talks ZeroMQ over unix sockets (``transport: ipc``) in a folder bound into the
sandbox, since the sandbox's network namespace cannot reach the host's loopback. When the
run ends the launcher writes how it ended to ``$DISTGRADE_NB_RESULT`` (a path outside the
sandbox), which is how the grader tells a wall-clock kill from a normal shutdown.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

from graders import sandbox


def kernel_env(workdir: Path) -> dict[str, str]:
    """The kernel's environment: nothing of the service's, and not the repo (the test cells
    import nothing from it)."""
    return {"PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin", "HOME": str(workdir),
            "IPYTHONDIR": str(workdir / ".ipython"),
            "JUPYTER_RUNTIME_DIR": str(workdir / ".runtime"), "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def _limits() -> sandbox.Limits:
    raw = json.loads(os.environ.get("DISTGRADE_NB_LIMITS", "{}"))
    fields = sandbox.Limits.__dataclass_fields__
    return sandbox.Limits(**{k: v for k, v in raw.items() if k in fields})


def main(argv: list[str]) -> int:
    """Run ipykernel in the sandbox with the connection file nbclient wrote."""
    conn = Path(argv[argv.index("-f") + 1])
    extra = [a for i, a in enumerate(argv) if a != "-f" and (i == 0 or argv[i - 1] != "-f")]
    info = json.loads(conn.read_text())
    if info.get("transport") != "ipc":
        raise SystemExit("kernel_sandbox needs transport=ipc (the sandbox has its own network)")
    ipc_dir = Path(info["ip"]).resolve().parent
    workdir = Path(os.environ["DISTGRADE_NB_WORKDIR"])
    workdir.mkdir(parents=True, exist_ok=True)
    inner_conn = workdir / "kernel.json"
    shutil.copyfile(conn, inner_conn)  # nbclient's copy is 0600 root; the kernel's uid reads this one
    os.chmod(ipc_dir, 0o777)  # the kernel (sandbox uid) creates its sockets here
    # The kernel lives in its own session inside the sandbox, so an interrupt cannot reach it;
    # ignoring SIGINT lets a graceful shutdown finish and the result file be written. SIGTERM ends
    # the sandbox cleanly (sandbox.run's cleanup kills the cgroup).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = os.environ.get("DISTGRADE_NB_RESULT")
    try:
        result = sandbox.run([sys.executable, "-m", "ipykernel_launcher", "-f", str(inner_conn), *extra],
                             workdir=workdir, limits=_limits(), env=kernel_env(workdir),
                             rw_binds=[(str(ipc_dir), str(ipc_dir))])
    except sandbox.SandboxSetupError as e:  # the grader (notebook.py) turns this into an infrastructure error
        if out:
            Path(out).write_text(json.dumps({"setup_error": str(e)[-4000:]}))
        return 4
    if out:
        Path(out).write_text(json.dumps({
            "returncode": result.returncode, "timed_out": result.timed_out, "wall_s": round(result.wall_s, 2),
            "killed_reason": result.killed_reason, "oom_killed": result.oom_killed, "layers": result.layers,
            "degraded": result.degraded, "stderr_tail": result.stderr[-2000:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
