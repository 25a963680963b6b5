"""Tamper evidence inside a rank: an audit hook installed before any student code runs.

``sys.addaudithook`` hooks cannot be removed, so whatever the student's script does later,
CPython reports these operations to ``_hook`` first. Honest training never needs them;
each becomes an *integrity event*, sent at once on the rank's stream (data already sent
cannot be taken back) or, where the stream is not usable, on a fresh connection that the
grader counts as tampering by itself:

* ``gc.get_objects`` / ``gc.get_referrers`` / ``gc.get_referents`` (the way to find the
  harness's stream), ``sys._current_frames``;
* a frame obtained by ``sys._getframe``/``inspect``/``traceback`` from student code while a
  harness frame is below it (its locals hold the observer), a traceback's ``tb_frame`` read by
  student code when that frame is the harness's, and the frame of a harness generator (the
  stream's gate, which holds the socket and the MAC);
* ``ctypes`` calls and loads made by the student's code;
* the channel folder (open, list, chdir, connect, bind) and ``/proc/<pid>/fd`` listings or
  opens; a unix socket made from a raw file descriptor by student code;
* imports of ``distgrade_harness``/``sitecustomize`` once the harness is installed
  (``importlib.reload`` and ``sys.modules`` tricks import again), code compiled by the student
  under a library's or the harness's file name (to pass as one of them);
* ``sys.settrace``/``sys.setprofile`` from student code; assigning to attributes of the
  classes the harness patches (``DataLoader`` iterators, ``DistributedDataParallel``), and
  replacing the code or defaults of a harness function (the stream's caller checks).

"Student code" is a frame whose file is neither in the Python installation, nor in the
harness, nor frozen. Limits (documented for staff): plain attribute access is not audited,
so a student who walks ``__closure__`` cells of the patched torch functions can reach the
observer without any event here, and change its counters (it cannot send records: the
stream checks every caller, see ``channel``); a function's ``__globals__`` is not audited on
this Python. The grader's cross-checks, the seal, and evidence gathered outside the process
are what such a script meets.
"""
from __future__ import annotations

import os
import socket
import sys
import sysconfig
import threading

PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir", "os.chmod", "os.rename", "os.remove",
                         "os.unlink", "os.link", "os.symlink", "os.truncate", "shutil.rmtree", "os.mkdir",
                         "os.rmdir", "os.utime", "os.chown"})
WATCHED_PREFIXES = ("gc.", "sys._getframe", "sys._current_frames", "object.__getattr__", "ctypes.", "import",
                    "open", "os.", "shutil.rmtree", "socket.", "sys.settrace", "sys.setprofile", "compile",
                    "object.__setattr__", "distgrade_harness.", "code.__new__")
MAX_EVENTS = 32  # sent per process; later ones are only counted
# traceback's functions that turn frames into FrameSummary objects (file, line, name) and hand out no frame
SUMMARISERS = frozenset({"_extract_from_extended_frame_gen", "clear_frames"})
_HERE = os.path.dirname(os.path.abspath(__file__))


def _library_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    return tuple(sorted(os.path.join(r, "") for r in roots if r))


def install(channel_dir: str, alarm, *, watched_types=()):
    """Install the hook; ``alarm(event_dict)`` is how events leave the process.

    ``watched_types`` are classes whose attributes the harness patched; returns ``watch(*types)``
    to add more once they are imported.
    """
    chan = os.path.join(os.path.abspath(channel_dir), "")
    chan_bare = chan.rstrip(os.sep)
    libs = _library_roots()
    here = os.path.join(os.path.dirname(_HERE), "")  # the package and the sitecustomize that starts it
    ctypes_dir = os.sep + "ctypes" + os.sep
    proxies = (os.sep + "inspect.py", os.sep + "traceback.py")
    socket_py = os.sep + "socket.py"
    state = {"sent": 0, "counts": {}, "watched": tuple(watched_types)}
    local = threading.local()  # re-entry guard per thread (the hook's own calls are audited too)
    # Bound now, before student code: replacing ``sys._getframe`` or ``os.path.normpath`` later
    # (plain module attributes, not audited) must not blind the hook.
    _getframe, fsdecode, isabs, pjoin, getcwd, normpath, basename = (
        sys._getframe, os.fsdecode, os.path.isabs, os.path.join, os.getcwd, os.path.normpath, os.path.basename)
    AF_UNIX = socket.AF_UNIX
    own_pid = os.getpid

    def library(filename: str) -> bool:
        return filename.startswith(libs) or filename.startswith("<frozen")

    def harness(filename: str) -> bool:
        return filename.startswith(here)

    def student(filename: str) -> bool:
        return not (library(filename) or harness(filename) or filename.startswith("<"))

    def caller(skip_ctypes: bool = False, skip_frozen: bool = False, skip_socket: bool = False):
        """The innermost frame outside this hook (and outside ctypes' / importlib's / socket's own code)."""
        f = _getframe(1)
        while f is not None:
            fn = f.f_code.co_filename
            if not (fn == __file__ or (skip_ctypes and ctypes_dir in fn) or (skip_frozen and fn.startswith("<frozen"))
                    or (skip_socket and fn.endswith(socket_py))):
                break
            f = f.f_back
        return f

    def by_student(**kw) -> bool:
        c = caller(**kw)
        return c is not None and student(c.f_code.co_filename)

    def by_harness() -> bool:
        c = caller(skip_frozen=True)
        return c is not None and harness(c.f_code.co_filename)

    def by_student_or_proxy() -> bool:
        """Student code read it, directly or through ``inspect``/``traceback`` called by student code.

        Only the frame that called the proxy decides: ``multiprocessing`` or torch printing a child's
        crash with ``traceback`` (a spawn re-run without a main guard) is not the student's doing.
        """
        c = caller()
        while c is not None and c.f_code.co_filename.endswith(proxies):
            c = c.f_back
        return c is not None and student(c.f_code.co_filename)

    def summarised(f) -> bool:
        """Is this read inside ``traceback``'s own formatting, which keeps only file, line and name?

        ``traceback.print_exc()`` or ``logging.exception`` after an error that passed through a patched
        function (a failed ``torch.save``) reads the harness frame's ``tb_frame`` on the way to a
        ``FrameSummary``; the student never gets the frame. ``walk_tb`` iterated by the student's own
        code, or ``inspect.getinnerframes``, does hand it out."""
        n = 0
        while f is not None and f.f_code.co_filename.endswith(proxies) and n < 20:
            if f.f_code.co_name in SUMMARISERS:
                return True
            f, n = f.f_back, n + 1
        return False

    def chain_has_harness(frame) -> bool:
        f, n = frame, 0
        while f is not None and n < 200:
            if harness(f.f_code.co_filename):
                return True
            f, n = f.f_back, n + 1
        return False

    def in_channel(path) -> bool:
        if isinstance(path, bytes):
            path = fsdecode(path)
        if not isinstance(path, str) or not path:
            return False
        if not isabs(path):
            try:
                path = pjoin(getcwd(), path)
            except OSError:
                return False
        path = normpath(path)
        return path == chan_bare or path.startswith(chan)

    def proc_fd(path) -> bool:
        if isinstance(path, bytes):
            path = fsdecode(path)
        if not isinstance(path, str) or not path.startswith("/proc/"):
            return False
        parts = normpath(path).split("/")  # ['', 'proc', 'self', 'fd', ...]
        return len(parts) >= 4 and parts[3] in ("fd", "fdinfo", "mem") and (
            parts[2] in ("self", "thread-self") or parts[2] == str(own_pid()))

    def report(event: str, detail: str = "") -> None:
        counts = state["counts"]
        counts[event] = counts.get(event, 0) + 1
        if counts[event] > 1 or state["sent"] >= MAX_EVENTS:
            return
        state["sent"] += 1
        where = ""
        try:
            f = caller()
            while f is not None and not student(f.f_code.co_filename):
                f = f.f_back
            if f is not None:
                where = f"{basename(f.f_code.co_filename)[:60]}:{f.f_lineno}"
        except Exception:
            pass
        alarm({"event": event[:60], "detail": detail[:200], "where": where})

    def check(event: str, args: tuple) -> None:
        if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"):
            if not by_harness():
                report(event, "object-graph or all-thread frame introspection")
        elif event == "sys._getframe":
            frame = args[0] if args else None
            if frame is None:
                return
            fn = frame.f_code.co_filename
            if not (student(fn) or fn.endswith(proxies)):
                return  # a library's own frame (logging, namedtuple, torch): not the student's hand
            f = frame
            while f is not None and library(f.f_code.co_filename):
                f = f.f_back  # inspect/traceback on behalf of whom?
            if f is not None and student(f.f_code.co_filename) and chain_has_harness(f.f_back):
                report(event, "a frame whose callers include the harness")
        elif event == "object.__getattr__":
            obj, name = (tuple(args) + (None, None))[:2]
            if name == "tb_frame" and obj is not None:
                fr = getattr(obj, "tb_frame", None)  # this read is audited too: suppressed by the guard
                if fr is not None and harness(fr.f_code.co_filename) and by_student_or_proxy() and not summarised(caller()):
                    report("traceback.tb_frame", "a harness frame read from a traceback")
            elif name in ("gi_frame", "cr_frame", "ag_frame") and obj is not None:
                code = getattr(obj, name[:2] + "_code", None)  # the stream's gate keeps its socket in one
                if code is not None and harness(code.co_filename) and by_student_or_proxy():
                    report("generator.frame", "the frame of a harness generator")
        elif event.startswith("ctypes."):
            if by_student(skip_ctypes=True):
                report("ctypes", event)
        elif event == "distgrade_harness.load":
            report("import", "the grader's harness loaded again")
        elif event == "import":
            name = args[0] if args else ""
            if (isinstance(name, str) and (name == "sitecustomize" or name.split(".")[0] == "distgrade_harness")
                    and not by_harness()):
                report("import", "the grader's harness imported again")
        elif event in PATH_EVENTS:
            path = args[0] if args else None
            if in_channel(path) and not by_harness():
                report("channel." + event, "the grader's channel folder")
            elif proc_fd(path) and not by_harness():
                report("procfd." + event, "the process's own descriptors through /proc")
        elif event in ("socket.connect", "socket.bind"):
            addr = args[1] if len(args) > 1 else None
            if isinstance(addr, (str, bytes)) and in_channel(addr) and not by_harness():
                report("channel." + event, "the grader's channel socket")
        elif event == "socket.__new__":
            family = args[1] if len(args) > 1 else None
            if family in (-1, AF_UNIX) and by_student(skip_socket=True):
                report("socket.fromfd", "a unix socket made by the script (possibly from a raw descriptor)")
        elif event in ("sys.settrace", "sys.setprofile"):
            if by_student():
                report(event, "a trace/profile function installed by the script")
        elif event in ("compile", "code.__new__"):  # code.replace(co_filename=...) is code.__new__
            filename = args[1] if len(args) > 1 else None
            if isinstance(filename, bytes):
                filename = fsdecode(filename)
            if isinstance(filename, str) and (harness(filename) or library(filename)) and by_student():
                report("compile.disguised", "code compiled under a library's or the harness's name")
        elif event == "object.__setattr__":
            obj = args[0] if args else None
            if state["watched"] and any(obj is t for t in state["watched"]) and not by_harness():
                report("patch.harness_hook", f"{getattr(obj, '__name__', '?')}.{str(args[1])[:40]}")
            elif len(args) > 1 and args[1] in ("__code__", "__defaults__", "__kwdefaults__"):
                code = getattr(obj, "__code__", None)  # a harness function's body swapped (the stream's checks)
                if code is not None and harness(getattr(code, "co_filename", "")) and not by_harness():
                    report("patch.harness_code", f"{getattr(obj, '__qualname__', '?')[:60]}.{args[1]}")

    def _hook(event: str, args: tuple) -> None:
        if not event.startswith(WATCHED_PREFIXES) or getattr(local, "busy", False):
            return
        local.busy = True
        try:
            check(event, args)
        except Exception:  # the hook must never break the student's run
            pass
        finally:
            local.busy = False

    sys.addaudithook(_hook)

    def watch(*types) -> None:
        state["watched"] = tuple(state["watched"]) + tuple(types)

    return watch
