"""Run untrusted student code with limits, failing closed when a protection is missing.

INTERFACE (stable, used by every runner):

    result = sandbox.run(argv, workdir=job/"run", limits=Limits(...), env={...},
                         ro_binds=[(host_path, path_inside)], rw_binds=[...],
                         gpus=None)

``argv`` and paths are as seen *inside* the sandbox; ``workdir`` is bound read-write at
the same path. The returned ``SandboxResult`` says how the run ended and which layers
were in force (``layers``) or missing and why (``degraded``).

The package, one concern per module:

* ``bwrap``        the bubblewrap command line: every namespace, an allow-list of read-only
                   binds (system runtime, Python environment, then the runner's binds),
                   private ``/proc``, ``/dev``, ``/tmp`` and ``/dev/shm`` with quotas;
* ``credentials``  one uid per concurrent job (a slot held by ``flock``), the uid drop,
                   rlimits, the environment scrub, the reaping of a uid after its run;
* ``cgroups``      memory, pids and cpuset limits and the kill of every process of a run;
* ``watch``        the watch loop: bounded output, limits enforced, everything reaped;
* ``untrusted``    reading what student code may have planted, without following it;
* ``result``       ``Limits``, ``SandboxResult`` and ``KilledReason``.

**Fail closed.** ``REQUIRED`` names the layers a grading run must have: a network namespace,
a mount namespace with the allow-list, an unprivileged uid, a memory limit (cgroup, or
RLIMIT_AS without GPUs) and a kill of the whole process tree (pid namespace or cgroup).
``DISTGRADE_SANDBOX`` decides what a missing one means:

``required``  refuse: ``SandboxSetupError``, an infrastructure failure that costs no attempt
              and is retried (the worker sets this unless the operator chose ``none``);
``auto``      (default) ``required`` when running as root, as a service does; otherwise (a
              student's laptop) run with what there is and list what is off in ``degraded``;
``none``      the operator's explicit choice: no bubblewrap, nothing required.

Files a run leaves in ``workdir`` or an ``rw_binds`` folder are the student's: read them
with ``graders.sandbox.untrusted``. ``workdir`` is chowned to the job's uid; ``rw_binds``
keep their modes. Bind targets must exist on the host or be new paths (bwrap creates them).
A process killed by signal N reports ``returncode`` -N without bwrap and 128+N with it.
Other settings: ``DISTGRADE_SANDBOX_UIDS``, ``DISTGRADE_JOB_CPUS`` (``credentials``),
``DISTGRADE_CGROUP`` (``cgroups``), ``DISTGRADE_HIDE_PATHS`` (extra paths hidden inside
the allowed folders).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from graders.exceptions import SandboxSetupError
from graders.sandbox import bwrap as bw
from graders.sandbox import cgroups, credentials
from graders.sandbox.bwrap import bwrap_argv, find_bwrap, gpu_setup
from graders.sandbox.credentials import scrub_env
from graders.sandbox.result import KilledReason, Limits, MiB, SandboxResult
from graders.sandbox.watch import Session

__all__ = ["run", "probe", "Limits", "SandboxResult", "KilledReason", "SandboxSetupError", "find_bwrap",
           "bwrap_argv", "gpu_setup", "scrub_env", "missing_layers", "REQUIRED", "recorded", "MiB"]

# name -> predicate over the layers of a run
REQUIRED = {
    "network namespace": lambda ls: "netns:loopback" in ls,
    "mount namespace with the allow-list": lambda ls: "allow-list" in ls,
    "unprivileged uid": lambda ls: any(x.startswith("uid:") for x in ls),
    "memory limit (cgroup or RLIMIT_AS)": lambda ls: "rlimit-as" in ls or any(x.endswith(":memory") for x in ls),
    "process-tree kill (pid namespace or cgroup)":
        lambda ls: "pidns" in ls or any(x.startswith("cgroup-") for x in ls),
}
_RECORD: dict[str, list[str]] = {"layers": [], "degraded": []}


def __getattr__(name: str) -> Any:
    if name == "SANDBOX_UID":  # the current job's slot (see credentials)
        return credentials.current_uid()
    if name == "SANDBOX_GID":
        return int(os.environ.get("DISTGRADE_SANDBOX_GID", credentials.current_uid()))
    raise AttributeError(name)


def missing_layers(layers: Sequence[str]) -> list[str]:
    """The required layers (``REQUIRED``) that ``layers`` lacks."""
    return [name for name, present in REQUIRED.items() if not present(layers)]


def enforcement() -> str:
    """``required``, ``best-effort`` or ``off`` (see the module docstring)."""
    mode = os.environ.get("DISTGRADE_SANDBOX", "auto")
    if mode == "none":
        return "off"
    if mode in ("required", "bwrap") or os.geteuid() == 0:
        return "required"
    return "best-effort"


def recorded(reset: bool = False) -> dict[str, list[str]]:
    """Layers and degradations of every run in this process (for the report), optionally cleared."""
    out = {k: list(v) for k, v in _RECORD.items()}
    if reset:
        for v in _RECORD.values():
            v.clear()
    return out


def default_hide_paths() -> list[str]:
    """Paths to cover although an allowed folder holds them: ``DISTGRADE_HIDE_PATHS`` (none by default)."""
    raw = os.environ.get("DISTGRADE_HIDE_PATHS", "")
    return [p for p in raw.split(os.pathsep) if p]


def _plan(slot: credentials.Slot | None, gpus: Sequence[int] | None,
          limits: Limits) -> tuple[str | None, list[str], list[str], bool]:
    """(bwrap or None, layers, degraded, use RLIMIT_AS) for this host before the cgroup."""
    layers, degraded = ["jobdir", "session", "rlimits"], []
    if slot is not None:
        layers.append(f"uid:{slot.uid}")
    else:
        degraded.append("uid: the grader is not root, student code runs as the grader's own user")
    mode = os.environ.get("DISTGRADE_SANDBOX", "auto")
    binary = find_bwrap() if mode != "none" else None
    why_not = "bwrap: not installed" if binary is None else bw.probe(binary, slot.uid if slot else None)
    if mode == "none":
        why_not = "bwrap: disabled by DISTGRADE_SANDBOX=none"
    if why_not:
        degraded.append(why_not)
        binary = None
    else:
        layers += ["bwrap", "netns:loopback", "pidns", "allow-list", "ro-root", "private-tmp", "private-shm"]
    return binary, layers, degraded, limits.address_space and not gpus


def run(argv: Sequence[str], *, workdir: Path, limits: Limits, env: dict[str, str],
        ro_binds: Sequence[tuple[str, str]] = (), rw_binds: Sequence[tuple[str, str]] = (),
        gpus: Sequence[int] | None = None, hide_paths: Sequence[str] | None = None,
        stop: Callable[[], bool] | None = None) -> SandboxResult:
    """Run ``argv`` in ``workdir`` under ``limits``; never raises for student behaviour.

    ``stop``: asked every half second while the run lasts; once it returns True everything is
    killed and the result's ``killed_reason`` is ``STOPPED`` (the caller had the evidence it needed).

    Raises SandboxSetupError when the sandbox cannot be built: a required layer is missing
    (see the module docstring), a bind source is missing, no uid is free, a fork failed.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    env, dropped = scrub_env(dict(env))
    with credentials.lease() as slot:
        if slot is not None:
            credentials.share_with_uid(slot, [workdir, *(Path(s) for s, _ in (*ro_binds, *rw_binds))], [workdir])
        binary, layers, degraded, may_use_as = _plan(slot, gpus, limits)
        layers += ["env-scrub"] if dropped else []
        cpus, cpu_note = credentials.job_cpus(slot)
        degraded += [cpu_note] if cpu_note else []
        cg, missing = cgroups.create(limits.memory_bytes, limits.nproc, cpus)
        degraded += missing
        try:
            use_as = may_use_as and (cg is None or "memory" not in cg.dirs)
            layers += (["rlimit-as"] if use_as else []) + (cg.layers if cg else ["killpg"])
            layers += [f"cpus:{cgroups.cpu_list(cpus)}"] if cpus else []
            _refuse_if_missing(layers, degraded)
            gpu_args: list[str] = []
            if gpus:
                gpu_args, gpu_env = gpu_setup(gpus, isolated=binary is not None)
                gpu_args += ["--ro-bind", "/sys", "/sys"]  # NVML and NCCL read the PCI topology there (not verified on a GPU host)
                env.update(gpu_env)
                layers.append("gpu:" + ",".join(str(g) for g in gpus))
            hide = [p for p in (default_hide_paths() if hide_paths is None else hide_paths) if Path(p).exists()]
            layers += [f"hide:{p}" for p in hide] if binary else []
            cmd = list(argv) if binary is None else bwrap_argv(
                argv, bwrap=binary, workdir=workdir, hide=hide, ro_binds=ro_binds, rw_binds=rw_binds,
                gpu_args=gpu_args, tmp_bytes=limits.disk_bytes, shm_bytes=limits.shm_bytes,
                hosts_file=bw.sandbox_hosts_file())
            # with a pids cgroup the per-uid NPROC rlimit is only a loose backstop
            nproc_rlimit = limits.nproc * 4 if cg and "pids" in cg.dirs else limits.nproc
            pre = credentials.preexec(limits, cg.procs_files() if cg else [], slot, use_as, nproc_rlimit, cpus)
            session = Session(cmd, workdir=workdir, env=env, limits=limits, preexec=pre, cgroup=cg,
                              sandbox_uid=slot.uid if slot else None,
                              setup_mark=bw.SETUP_MARK if binary else None,
                              disk_roots=[workdir, *(Path(s) for s, _ in rw_binds)], stop=stop)
            result = session.wait()
        finally:
            if cg is not None:
                cg.kill_all()
                cg.remove()
            if slot is not None:  # after every run: nothing of its uid survives, nothing stays in /tmp
                credentials.reap(slot.uid)
    result.layers, result.degraded = layers + ["output-cap", "disk-quota"], degraded
    _RECORD["layers"] = sorted(set(_RECORD["layers"]) | set(result.layers))
    _RECORD["degraded"] = sorted(set(_RECORD["degraded"]) | set(degraded))
    return result


def _refuse_if_missing(layers: list[str], degraded: list[str]) -> None:
    missing = missing_layers(layers)
    if missing and enforcement() == "required":
        raise SandboxSetupError(
            "refusing to run student code: the sandbox lacks " + "; ".join(missing) + ". Layers present: "
            + ", ".join(layers) + ". Why: " + ("; ".join(degraded) or "not reported") + ". Fix the host (root, a working bwrap, a writable cgroup), or set "
            "DISTGRADE_SANDBOX=none to run without these protections.")


def probe() -> dict[str, Any]:
    """What a run gets on this host now: ``enforcement``, ``layers``, ``degraded``, ``missing``, ``error``.

    Runs ``/bin/true`` in a throw-away job folder (the start-up check of ``./distgrade up``
    and of each worker); never raises.
    """
    from graders import workspace

    out: dict[str, Any] = {"enforcement": enforcement(), "bwrap": find_bwrap(), "layers": [],
                           "degraded": [], "missing": [], "error": None}
    try:
        with workspace.job_dir("probe") as job:
            # address_space=False, as both assignments (and every GPU run) use it: the memory
            # limit must then come from a cgroup, which is what a real job will need here
            r = run(["/bin/true"], workdir=job / "run", env={"PATH": "/usr/bin:/bin"},
                    limits=Limits(wall_s=30, memory_bytes=256 * MiB, nproc=32, address_space=False))
        out.update(layers=r.layers, degraded=r.degraded, missing=missing_layers(r.layers))
        if r.returncode != 0:
            out["error"] = f"/bin/true exited {r.returncode}: {r.stderr[-300:]}"
    except (SandboxSetupError, OSError) as e:
        out["error"] = str(e)
        with contextlib.suppress(Exception):
            out["missing"] = [m for m in REQUIRED if m in str(e)]
    return out
