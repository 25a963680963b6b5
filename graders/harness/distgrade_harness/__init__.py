"""The grader's observer inside each rank of a student's torchrun job.

Roles, decided from the environment before any student code runs:

* the torchrun launcher (no ``RANK``): only survives the stack-dump signal;
* a rank (``RANK`` set, first interpreter of that rank): takes its one-time token,
  connects to the grader's socket and installs the observation hooks;
* a child of a rank (DataLoader worker started with spawn, or any subprocess):
  only dumps its stack on the signal, so a hang inside it is visible.

Tamper evidence (``audit``): in ranks and their children an audit hook is installed
before anything else, and what honest training never does (``gc`` object walks, frames of
the harness, ``ctypes``, the channel folder, re-importing this package...) is reported to
the grader as an integrity event. Nothing of the harness is left in module globals: the
stream and observer live only in closures of the installed hooks, and this package is
removed from ``sys.modules`` once installed, so importing it again is itself audited.
Limits (documented for staff): the hooks run inside the student's interpreter, so code
can still reach them through plain attribute access (``__closure__`` cells of patched torch
functions) without an audit event; ``channel.Stream`` reports direct sends, the grader
checks the record count seal, validates every record and cross-checks it with what it
measures outside the process. The sandbox keeps tampering from reaching outside the job.
"""
from __future__ import annotations

import atexit
import faulthandler
import os
import signal
import sys

# Loading this package again in a process whose audit hook is installed (importlib.import_module
# and reload do not raise CPython's "import" event) is reported by that hook.
sys.audit("distgrade_harness.load")

DUMP_SIGNAL = signal.SIGUSR1
_OWNER_ENV = "DISTGRADE_HARNESS_OWNER"
_dump_files = []  # faulthandler keeps only the fd: keep the file objects alive


def install() -> None:
    """Pick this process's role and install what it needs; never raises."""
    channel_dir = os.environ["DISTGRADE_CHANNEL"]
    try:
        if "RANK" not in os.environ:
            atexit.register(_settle_before_teardown)
            signal.signal(DUMP_SIGNAL, signal.SIG_IGN)  # the launcher must outlive the dump
            return
        rank = int(os.environ["RANK"])
        owner = os.environ.get(_OWNER_ENV)
        if owner and owner != str(os.getpid()):
            _register_dump(os.path.join(channel_dir, f"stack-rank{rank}-child{os.getpid()}.txt"))
            _install_child_audit(channel_dir, rank)
            return
        os.environ[_OWNER_ENV] = str(os.getpid())
        _register_dump(os.path.join(channel_dir, f"stack-rank{rank}.txt"))
        _install_rank(channel_dir, rank)
    except Exception as exc:  # never break the student's run; the grader sees the missing stream
        sys.stderr.write(f"[distgrade harness] {type(exc).__name__}: {exc}\n")


def _settle_before_teardown() -> None:
    """The launcher's last act: freeze every live object, so CPython's teardown deallocates modules by
    reference count without walking torch's objects again, collection after collection (about 0.5 to 1 s
    of CPU per launch, two launches a grading). Only the launcher, which runs none of the student's code:
    in a rank, an object of the student's that becomes cyclic garbage only at teardown (a log file held
    by an object that refers to itself) would never be finalized, and its unflushed lines would be lost."""
    import gc

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(spec, "name", None) == "torch.distributed.run":  # not a process of the student's without RANK
        gc.collect()
        gc.freeze()


def _register_dump(path: str) -> None:
    try:
        f = open(path, "w")
        os.chmod(path, 0o644)
    except OSError:
        return
    _dump_files.append(f)
    faulthandler.register(DUMP_SIGNAL, file=f, all_threads=True, chain=False)


def _install_child_audit(channel_dir: str, rank: int) -> None:
    """A spawned child of a rank has no token: its events go out on a token-less connection."""
    from distgrade_harness import audit, channel

    sock = os.path.join(channel_dir, "sock")
    audit.install(channel_dir, lambda event: channel.send_alarm(sock, "", rank, {"type": "integrity", **event}))
    _forget_modules()


def _install_rank(channel_dir: str, rank: int) -> None:
    from distgrade_harness import audit, channel, compat

    token = channel.take_token(channel_dir, rank)  # unlinked before student code runs
    stream = channel.Stream(os.path.join(channel_dir, "sock"), token, rank)
    del token
    watch = audit.install(channel_dir, stream.alarm)  # before torch: its import is audited too
    stream.send({"type": "audit", "installed": True})  # the grader requires it: no hook, no trust
    compat.install()
    from distgrade_harness import hooks  # imports torch

    observer = hooks.Observer(stream, rank)
    observer.install()
    from distgrade_harness import signals

    signals.install(stream)  # a rank killed by its own code is the student's; see graders.torchrun
    atexit.register(observer.at_exit)
    if os.environ.get("DISTGRADE_FSDP") == "1":  # the FSDP homework's extra observer
        from distgrade_harness import fsdp

        atexit.register(fsdp.install(stream, rank).at_exit)  # runs before the end marker
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import dataloader

    watch(dataloader._BaseDataLoaderIter, DistributedDataParallel)  # the classes the hooks patched
    _forget_modules()


def _forget_modules() -> None:
    """Drop this package from ``sys.modules``: reaching it again means importing it (audited)."""
    for name in [n for n in sys.modules if n == "distgrade_harness" or n.startswith("distgrade_harness.")]:
        sys.modules.pop(name, None)
