"""One control group per sandboxed run: memory and pids limits, CPUs, accounting and a reliable kill.

cgroup v1 (one hierarchy per controller, e.g. ``/sys/fs/cgroup/memory``) is used for
each controller whose hierarchy is writable; otherwise cgroup v2 (one unified tree)
when it delegates both ``memory`` and ``pids``. Each run's group is created *below the
service's own group* (read from ``/proc/self/cgroup``) so the container's limits still
apply to it, under a ``distgrade/`` folder that also collects stale groups left by a
worker that died.

With ``cpus``, the run is confined to those CPUs by the ``cpuset`` controller (v1 hierarchy
or v2 ``cpuset.cpus``), so two concurrent jobs given disjoint CPUs cannot slow each other's
timed runs; a v1 cpuset group starts empty, so ``distgrade/`` inherits its parent's
``cpuset.cpus`` and ``cpuset.mems`` before a run's group takes its share.

The group is the only complete list of a job's processes: a ``setsid`` daemon leaves
the process group but never its cgroup, so killing "everything in the group" is what
makes "nothing outlives the job" true.
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_MOUNT = Path(os.environ.get("DISTGRADE_CGROUP_MOUNT", "/sys/fs/cgroup"))


def _own_paths() -> dict[str, str]:
    """Map controller name (or "" for v2) to this process's group path."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            paths[c] = path
    return paths


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text()
    except OSError:
        return default


def _keyed(path: Path, key: str) -> int:
    """Value of ``key N`` in a flat-keyed cgroup file (``memory.events``, ``pids.events``)."""
    for line in _read(path).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return int(parts[1])
    return 0


def _ppid(pid: int) -> int:
    stat = _read(Path(f"/proc/{pid}/stat"))
    try:  # the command name may hold spaces and parentheses: split after the last ")"
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


def _creator_alive(name: str) -> bool:
    """Whether the process that created group ``run-<pid>-<id>`` still exists."""
    try:
        os.kill(int(name.split("-")[1]), 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _make_child(parent: Path) -> Path | None:
    """Create ``parent/distgrade/run-…``; None when that hierarchy is not writable here."""
    base = parent / "distgrade"
    try:
        base.mkdir(exist_ok=True)
        for stale in base.glob("run-*"):  # groups of a worker that was killed; rmdir only if empty
            if _creator_alive(stale.name):  # a concurrent run's fresh group is empty until its child joins
                continue
            try:
                stale.rmdir()
            except OSError:
                pass
        child = base / f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        child.mkdir()
        return child
    except OSError:
        return None


def sweep() -> int:
    """Remove the empty run groups whose creator is dead, wherever this host puts them; returns how many.

    ``_make_child`` does this for its own folder at each run; a worker calls this at start and
    after each grading, so a killed worker's groups do not wait for the next run.
    """
    own = _own_paths()
    bases = {CGROUP_MOUNT / c / p.lstrip("/") / "distgrade" for c, p in own.items() if c} | \
            {CGROUP_MOUNT / c / "distgrade" for c in own if c}
    for mount in (CGROUP_MOUNT / "unified", CGROUP_MOUNT):
        bases |= {parent / "distgrade" for parent in _v2_parents(mount, own.get("", "/"))}
    removed = 0
    for base in bases:
        try:
            stale = [g for g in base.glob("run-*") if not _creator_alive(g.name)]
        except OSError:
            continue
        for group in stale:
            try:
                group.rmdir()
                removed += 1
            except OSError:  # not empty (a process still in it) or already gone
                pass
    return removed


def _v1_dir(controller: str, own: dict[str, str]) -> Path | None:
    mount = CGROUP_MOUNT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    parent = mount / own.get(controller, "/").lstrip("/")
    if not parent.is_dir():  # mounted without a cgroup namespace matching ours
        parent = mount
    if controller == "cpuset":  # a new v1 cpuset group has no CPU and no memory node until given some
        base = parent / "distgrade"
        try:
            base.mkdir(exist_ok=True)
        except OSError:
            return None
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not _read(base / name).strip() and not _copy(parent / name, base / name):
                return None
    return _make_child(parent)


def _copy(src: Path, dst: Path) -> bool:
    try:
        dst.write_text(src.read_text().strip())
        return True
    except OSError:
        return False


def cpu_list(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` as the kernel's list format ``0,1,2,5``."""
    return ",".join(str(c) for c in sorted(set(cpus)))


@dataclass
class JobCgroup:
    """The group(s) one run lives in; ``dirs`` maps controller to its folder."""

    version: int
    dirs: dict[str, Path] = field(default_factory=dict)

    @property
    def layers(self) -> list[str]:
        """Names for ``SandboxResult.layers``, e.g. ``cgroup-v1:memory``."""
        return [f"cgroup-v{self.version}:{c}" for c in sorted(self.dirs)]

    def procs_files(self) -> list[str]:
        """Files a child writes its pid into (from ``preexec_fn``) to join every group."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def pids(self) -> set[int]:
        """Every process currently in the job's group(s)."""
        found: set[int] = set()
        for d in set(self.dirs.values()):
            found.update(int(p) for p in _read(d / "cgroup.procs").split())
        return found

    def signal_all(self, sig: int, uid: int | None = None, skip_comm: str = "bwrap",
                   parents: bool | None = None) -> None:
        """Send ``sig`` to the job's processes; only those running as ``uid`` if given.

        ``skip_comm`` spares the sandbox's own monitor: a dump signal such as SIGUSR1
        would otherwise terminate bwrap and take the ranks down before they dump.
        ``parents`` True/False limits it to processes with/without children in the job.
        """
        pids = self.pids()
        ppids = {_ppid(p) for p in pids}
        for pid in pids:
            if parents is not None and (pid in ppids) != parents:
                continue
            try:
                status = _read(Path(f"/proc/{pid}/status"))
                if uid is not None and f"Uid:\t{uid}\t" not in status:
                    continue
                if _read(Path(f"/proc/{pid}/comm")).strip() == skip_comm:
                    continue
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError, ValueError):
                pass

    def kill_all(self, wait_s: float = 5.0) -> bool:
        """SIGKILL everything in the group until it is empty; True when it is."""
        kill_file = self.dirs.get("memory", next(iter(self.dirs.values()))) / "cgroup.kill"
        deadline = time.monotonic() + wait_s
        while True:
            pids = self.pids()
            if not pids:
                return True
            if self.version == 2 and kill_file.exists():
                try:
                    kill_file.write_text("1")
                except OSError:
                    pass
            for pid in pids:  # v1 has no cgroup.kill; a fork racing us is caught next round
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def peak_memory(self) -> int | None:
        """High-water mark of the job's memory, in bytes."""
        d = self.dirs.get("memory")
        if d is None:
            return None
        raw = _read(d / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"))
        return int(raw) if raw.strip().isdigit() else None

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit."""
        d = self.dirs.get("memory")
        if d is None:
            return 0
        if self.version == 1:
            return _keyed(d / "memory.oom_control", "oom_kill")
        return _keyed(d / "memory.events", "oom_kill")

    def oom_at_limit(self) -> bool:
        """True once the job's own memory limit was reached and reclaim failed (its OOM, not the host's).

        A process of the job killed by the host's OOM killer (the host ran out, the job did not)
        counts in ``oom_kills`` but not here: that kill is the host's failure, not the student's.
        """
        d = self.dirs.get("memory")
        if d is None:
            return False
        if self.version == 1:  # the limit was hit (with swap accounting, that limit's counter)
            counts = [_read(d / name).strip() for name in ("memory.failcnt", "memory.memsw.failcnt")]
            hit = any(c.isdigit() and int(c) > 0 for c in counts)
        else:
            hit = _keyed(d / "memory.events", "oom") > 0
        # Some kernels leave the counter at 0 (seen here: cgroup v1, peak == limit, failcnt 0):
        # a peak at the limit is the job's own OOM as well.
        peak, limit = self.peak_memory(), self.memory_limit()
        return hit or bool(peak and limit and peak >= 0.98 * limit)

    def memory_limit(self) -> int | None:
        """The job's memory limit in bytes, as the kernel holds it."""
        d = self.dirs.get("memory")
        if d is None:
            return None
        raw = _read(d / ("memory.limit_in_bytes" if self.version == 1 else "memory.max")).strip()
        return int(raw) if raw.isdigit() else None

    def pids_limit_hit(self) -> bool:
        """True once a fork or clone was refused because of ``pids.max``."""
        d = self.dirs.get("pids")
        return d is not None and _keyed(d / "pids.events", "max") > 0

    def remove(self) -> None:
        """Delete the group folders (they must be empty)."""
        for d in set(self.dirs.values()):
            for _ in range(50):  # the kernel may lag a moment behind the last exit
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _write(path: Path, value: int) -> bool:
    return _write_text(path, str(value))


def _write_text(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def create(memory_bytes: int, pids_max: int,
           cpus: list[int] | None = None) -> tuple[JobCgroup | None, list[str]]:
    """Create and limit a group for one run; returns it (or None) and what is missing and why."""
    if os.environ.get("DISTGRADE_CGROUP", "auto") == "none":
        return None, ["cgroup: disabled by DISTGRADE_CGROUP=none"]
    own = _own_paths()
    cg = JobCgroup(version=1)
    missing: list[str] = []
    for controller in ("memory", "pids", *(("cpuset",) if cpus else ())):
        d = _v1_dir(controller, own)
        if d is not None:
            cg.dirs[controller] = d
    if "cpuset" in cg.dirs and not (_copy(cg.dirs["cpuset"].parent / "cpuset.mems", cg.dirs["cpuset"] / "cpuset.mems")
                                    and _write_text(cg.dirs["cpuset"] / "cpuset.cpus", cpu_list(cpus or []))):
        missing.append(f"cgroup-v1:cpuset: CPUs {cpu_list(cpus or [])} not writable")
        cg.dirs.pop("cpuset").rmdir()
    if "memory" in cg.dirs:
        ok = _write(cg.dirs["memory"] / "memory.limit_in_bytes", memory_bytes)
        # without swap accounting a job could page out past its limit
        memsw = cg.dirs["memory"] / "memory.memsw.limit_in_bytes"
        if ok and memsw.exists():
            _write(memsw, memory_bytes)
        if not ok:
            missing.append("cgroup-v1:memory: limit not writable")
    if "pids" in cg.dirs and not _write(cg.dirs["pids"] / "pids.max", pids_max):
        missing.append("cgroup-v1:pids: limit not writable")
    if cg.dirs:
        if cpus and "cpuset" not in cg.dirs and not missing:
            missing.append("cgroup-v1:cpuset: no writable cpuset hierarchy")
        return cg, missing
    return _create_v2(own, memory_bytes, pids_max, cpus)


def _v2_parents(mount: Path, own: str) -> list[Path]:
    """Where a run's group may go in a v2 tree: below the service's own group, else its nearest ancestor.

    cgroup v2 forbids a group with processes of its own from handing memory or pids to
    children ("no internal processes"): a service that shares its group with other
    processes (a VM's or container's command group, a login session) cannot delegate from
    it. The nearest ancestor that can still holds the service's group, so the limits
    above both keep applying; the run's own limits apply in any case.
    """
    parts = [p for p in own.split("/") if p]
    return [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _create_v2(own: dict[str, str], memory_bytes: int, pids_max: int,
               cpus: list[int] | None) -> tuple[JobCgroup | None, list[str]]:
    wanted = ("memory", "pids", *(("cpuset",) if cpus else ()))
    for mount in (CGROUP_MOUNT / "unified", CGROUP_MOUNT):
        if not _read(mount / "cgroup.controllers").split():
            continue
        # Both limits from one place if any place gives both; else the nearest that gives some.
        tries = [(parent, need) for need in ({"memory", "pids"}, set()) for parent in _v2_parents(mount, own.get("", "/"))]
        for parent, need in tries:
            cg = _v2_group(parent, wanted, need)
            if cg is None:
                continue
            if "memory" in cg.dirs:
                _write(cg.dirs["memory"] / "memory.max", memory_bytes)
                _write(cg.dirs["memory"] / "memory.swap.max", 0)
            if "pids" in cg.dirs:
                _write(cg.dirs["pids"] / "pids.max", pids_max)
            if "cpuset" in cg.dirs and not _write_text(cg.dirs["cpuset"] / "cpuset.cpus", cpu_list(cpus or [])):
                del cg.dirs["cpuset"]
            missing = [f"cgroup-v2:{c}: not delegated" for c in wanted if c not in cg.dirs]
            return cg, missing
    return None, ["cgroup: no writable v1 hierarchy nor v2 tree with memory/pids delegated"]


def _v2_group(parent: Path, wanted: tuple[str, ...], need: set[str]) -> JobCgroup | None:
    """A run's group under ``parent/distgrade`` with the ``wanted`` controllers it can have, or None
    if ``parent`` cannot delegate every one of ``need`` (or, with ``need`` empty, any of them)."""
    base = parent / "distgrade"
    try:
        base.mkdir(exist_ok=True)
    except OSError:
        return None
    have = set(_read(base / "cgroup.controllers").split()) & set(wanted)
    if have and need <= have:
        try:
            (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(have)))
        except OSError:
            have = set()
    if not have or not need <= have:
        try:
            base.rmdir()  # only if nothing lives there
        except OSError:
            pass
        return None
    child = _make_child(parent)
    return None if child is None else JobCgroup(version=2, dirs={c: child for c in have})
