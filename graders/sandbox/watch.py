"""The watch loop of one sandboxed run (formerly ``graders/sandbox_session.py``): bounded output, limits enforced, every process reaped.

A single thread multiplexes the child's stdout and stderr with the checks (wall clock,
output flood, disk quota, pids and memory events), so nothing blocks on a pipe that a
daemon keeps open and nothing buffers more than ``Limits.output_bytes`` per stream.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

from graders.exceptions import SandboxSetupError
from graders.sandbox.cgroups import JobCgroup
from graders.sandbox.result import KilledReason, Limits, SandboxResult

DISK_CHECK_EVERY_S = 0.5
DRAIN_AFTER_EXIT_S = 2.0  # how long pipes may stay open once every process is gone
TICK_S = 0.05
STOP_CHECK_S = 0.5  # how often the caller's ``stop`` predicate is asked (it may read records)
# The dump signal goes to leaf processes (the ranks) first and to their parents a moment
# later: torchrun dies of SIGUSR1, and once the main process is gone bwrap tears down
# the pid namespace, which would cut the ranks' stack dumps short.
PARENT_DUMP_DELAY_S = 0.5


EXITED = object()  # selector tag of the main process's pidfd


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # older kernel or Python: the tick notices the exit
        return None


class Tail:
    """The last ``limit`` bytes of a stream plus the count of everything seen."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        """Keep ``chunk``, dropping the oldest bytes beyond the limit."""
        self.total += len(chunk)
        self.buf += chunk
        if len(self.buf) > 2 * self.limit:  # trim in batches, not on every read
            del self.buf[:-self.limit]

    def text(self) -> str:
        """The kept tail as text, marked when something was cut."""
        data = bytes(self.buf[-self.limit:])
        if self.total > len(data):
            data = b"...[truncated]...\n" + data
        return data.decode("utf-8", errors="replace")


def disk_usage(roots: Sequence[Path], max_entries: int = 200_000) -> int:
    """Bytes allocated under ``roots``; a tree with too many entries counts as full."""
    total, seen = 0, 0
    stack = [str(r) for r in roots]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    seen += 1
                    if seen > max_entries:  # an inode bomb is a full disk too
                        return 1 << 62
                    total += e.stat(follow_symlinks=False).st_blocks * 512
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
        except OSError:
            continue
    return total


class Session:
    """Start ``cmd`` and watch it until it and everything it spawned are gone."""

    def __init__(self, cmd: list[str], *, workdir: Path, env: dict[str, str], limits: Limits,
                 preexec: Callable[[], None], cgroup: JobCgroup | None, sandbox_uid: int | None,
                 setup_mark: bytes | None, disk_roots: Sequence[Path], stop: Callable[[], bool] | None = None):
        self.cmd, self.workdir, self.env, self.limits = cmd, workdir, env, limits
        self.preexec, self.cg, self.uid = preexec, cgroup, sandbox_uid
        self.setup_mark, self.disk_roots = setup_mark, list(disk_roots)
        self.out, self.err = Tail(limits.output_bytes), Tail(limits.output_bytes)
        self.mark = bytearray()
        self.reason: KilledReason | None = None
        self.stop, self.next_stop_check = stop, 0.0

    def _start(self) -> subprocess.Popen:
        # stdin carries the setup mark: the inner shell writes it once bwrap's mounts
        # succeeded, then replaces stdin with /dev/null before exec'ing student code.
        mark_r, mark_w = os.pipe() if self.setup_mark else (-1, subprocess.DEVNULL)
        try:
            proc = subprocess.Popen(self.cmd, cwd=self.workdir, env=self.env, stdin=mark_w,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    preexec_fn=self.preexec)
        except (OSError, subprocess.SubprocessError) as e:
            raise SandboxSetupError(f"cannot start sandbox: {e}") from e
        finally:
            if self.setup_mark:
                os.close(mark_w)
        self.mark_fd = mark_r
        return proc

    def wait(self) -> SandboxResult:
        """Run to the end; kill on any limit; return what happened (``layers`` left to the caller)."""
        start = time.monotonic()
        proc = self._start()
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, self.out)
        sel.register(proc.stderr, selectors.EVENT_READ, self.err)
        if self.setup_mark:
            sel.register(self.mark_fd, selectors.EVENT_READ, self.mark)
        pidfd = _pidfd(proc.pid)  # wakes the loop the moment the main process exits
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, EXITED)
        deadline = start + self.limits.wall_s
        kill_at: float | None = None
        parents_at: float | None = None  # second wave of the dump signal, see PARENT_DUMP_DELAY_S
        next_disk = start + DISK_CHECK_EVERY_S
        exit_seen: float | None = None
        # pipes closing is no sign of the end: code may close stdout and keep running
        while sel.get_map() or exit_seen is None:
            self._read_ready(sel)
            now = time.monotonic()
            if proc.poll() is not None:
                if exit_seen is None:  # the main process is gone: nothing else may stay
                    exit_seen = now
                    self._kill_everything(proc)
                elif now - exit_seen > DRAIN_AFTER_EXIT_S:
                    break  # a writer escaped every kill; stop reading rather than hang
                continue
            if self.reason is None:
                self.reason = self._limit_hit(now, deadline, next_disk)
                if now >= next_disk:
                    next_disk = now + DISK_CHECK_EVERY_S
                if self.reason is not None:
                    kill_at = now
                    if self.reason == KilledReason.TIMEOUT and self.limits.dump_signal is not None:
                        self._signal_students(proc, self.limits.dump_signal, parents=False)
                        parents_at = now + min(PARENT_DUMP_DELAY_S, self.limits.dump_grace_s / 2)
                        kill_at = now + self.limits.dump_grace_s  # keep draining their dumps
            if parents_at is not None and now >= parents_at:
                self._signal_students(proc, self.limits.dump_signal, parents=True)
                parents_at = None
            if kill_at is not None and now >= kill_at:
                self._kill_everything(proc)
                kill_at = None
        for key in list(sel.get_map().values()):
            sel.unregister(key.fileobj)
            if key.data is EXITED:
                os.close(key.fd)
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
        if self.setup_mark:
            os.close(self.mark_fd)
        rc = proc.wait()
        self._check_setup(rc)
        return self._outcome(rc, time.monotonic() - start)

    def _read_ready(self, sel: selectors.BaseSelector) -> None:
        if not sel.get_map():
            time.sleep(TICK_S)
            return
        for key, _ in sel.select(timeout=TICK_S):
            fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
            if key.data is EXITED:
                sel.unregister(fd)
                os.close(fd)
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
            elif isinstance(key.data, Tail):
                key.data.add(chunk)
            elif len(key.data) < 256:
                key.data.extend(chunk)

    def _limit_hit(self, now: float, deadline: float, next_disk: float) -> KilledReason | None:
        if self.out.total + self.err.total > self.limits.output_kill_bytes:
            return KilledReason.OUTPUT
        if self.cg is not None and self.cg.oom_kills() > 0 and self.cg.oom_at_limit():
            return KilledReason.MEMORY
        if self.cg is not None and self.cg.pids_limit_hit():
            return KilledReason.PIDS
        if now >= next_disk and disk_usage(self.disk_roots) > self.limits.disk_bytes:
            return KilledReason.DISK
        if now >= deadline:
            return KilledReason.TIMEOUT
        if self.stop is not None and now >= self.next_stop_check:
            self.next_stop_check = now + STOP_CHECK_S
            try:
                wanted = bool(self.stop())
            except Exception:  # a broken predicate must not end a student's run: it runs on to its end
                wanted, self.stop = False, None
            if wanted:  # the grader has its evidence (graders.early_stop): no dump, kill at once
                return KilledReason.STOPPED
        return None

    def _signal_students(self, proc: subprocess.Popen, sig: int, parents: bool) -> None:
        if self.cg is not None:
            self.cg.signal_all(sig, uid=self.uid, parents=parents)
        elif parents:  # without a cgroup there is only the process group, in one wave
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _kill_everything(self, proc: subprocess.Popen) -> None:
        if self.cg is not None:
            self.cg.kill_all()
        try:  # also the fallback when there is no cgroup: the session's process group
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _check_setup(self, rc: int) -> None:
        if self.setup_mark and bytes(self.mark) != self.setup_mark and self.reason is None:
            raise SandboxSetupError(f"bubblewrap failed to set up the sandbox (exit {rc}): "
                                    f"{self.err.text()[-2000:]}")

    def _outcome(self, rc: int, wall_s: float) -> SandboxResult:
        reason = self.reason
        oom = self.cg is not None and self.cg.oom_kills() > 0
        host_oom = oom and not self.cg.oom_at_limit()  # the host ran out of memory, not the job
        if reason is None and oom and not host_oom:
            reason = KilledReason.MEMORY
        if reason is None and rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
            reason = KilledReason.DISK  # RLIMIT_FSIZE: one file grew past fsize_bytes
        leftover = len(self.cg.pids()) if self.cg is not None else 0
        return SandboxResult(returncode=rc, timed_out=reason == KilledReason.TIMEOUT, wall_s=wall_s,
                             stdout=self.out.text(), stderr=self.err.text(), killed_reason=reason,
                             oom_killed=oom and not host_oom, host_oom=host_oom, peak_memory_bytes=self.cg.peak_memory() if self.cg else None,
                             output_total_bytes=self.out.total + self.err.total, leftover_pids=leftover)
