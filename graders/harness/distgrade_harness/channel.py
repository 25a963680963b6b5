"""Client side of the grader's record channel: one unix-socket stream per rank.

The stream is the harness's only way out, so it is also what a student would try to
forge records through. Defences here (the rest is in ``audit`` and on the grader's side):

* every record path checks its caller: ``send`` accepts records only from harness code whose
  way in started at a legitimate entry point (a closure installed over a torch or builtin
  function, a hook torch calls, the exit handler), so a script that found the observer cannot
  drive its private methods (``_on_step``, ``_close_epoch``, ``_flush_steps``...) either, and
  ``_send`` accepts only this module's own calls. A refused call is reported as an integrity
  event. The socket, the MAC and the count live only in the ``_gate`` generator's suspended
  frame, which repeats the caller check with references bound at import (module globals can be
  swapped through a function's ``__globals__``; a generator's locals only through ``gi_frame``,
  which the audit hook reports) and encodes with the C JSON encoder;
* every record is counted and fed to an HMAC keyed with the rank's one-time token (the key
  then lives only inside the C hmac object), and ``close`` ends the stream with a ``seal``
  carrying the count and the MAC: bytes written to the socket behind the harness's back (the
  raw descriptor) break it, and a script without the token cannot make a new one;
* values that JSON cannot carry (a student's object as a learning rate) become a short
  type tag, never an exception inside the student's training step;
* ``alarm`` reports an integrity event even when this process may not use the stream (a
  forked worker) or the stream is broken: it opens a fresh connection, which the grader
  counts as tampering by itself and whose ``integrity`` field it records.
"""
from __future__ import annotations

import _json
import _socket
import hmac
import json
import os
import sys
import sysconfig as _sysconfig

# Bound at import, before student code: the script may replace ``json.dumps`` or methods of
# ``socket.socket`` (a Python class) to filter what the harness says; ``_socket.socket`` is a
# built-in type whose methods cannot be replaced.
_dumps = json.dumps
# The C encoder itself: ``json.dumps`` runs Python code (``JSONEncoder``, ``json.encoder`` globals) that a
# script could patch to change what a genuine record turns into on the wire, after the caller checks.
_c_encoder = _json.make_encoder
_c_ascii = _json.encode_basestring_ascii
_Socket = _socket.socket
_AF_UNIX, _SOCK_STREAM = _socket.AF_UNIX, _socket.SOCK_STREAM
_new_mac = hmac.new
_getframe = sys._getframe
_getpid = os.getpid

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package and its sitecustomize
_THIS = os.path.abspath(__file__)
if _THIS.endswith((".pyc", ".pyo")):
    _THIS = _THIS[:-1]
# torch calls the harness's registered hooks (optimizer, module forward): the installed package's folder, where a
# script cannot put code of its own without an audited compile() under a library's file name
def _torch_dirs() -> tuple[str, ...]:
    """Where torch is installed (found without importing it), else the environment's site folders' ``torch/``."""
    dirs = {os.path.join(_sysconfig.get_paths()[k], "torch", "") for k in ("purelib", "platlib")}
    try:
        from importlib.util import find_spec

        spec = find_spec("torch")
        dirs |= {os.path.join(os.path.realpath(d), "") for d in (spec.submodule_search_locations or [])} if spec else set()
        dirs |= {os.path.join(d, "") for d in (spec.submodule_search_locations or [])} if spec else set()
    except (ImportError, ValueError):
        pass
    return tuple(sorted(dirs))


_TORCH = _torch_dirs()
# The observers' methods that torch calls as registered hooks, and those ``atexit`` calls: their only ways in.
_TORCH_HOOKS = frozenset({"Observer._on_step", "Observer._on_step_pre", "FsdpObserver._pre_forward",
                          "FsdpObserver._post_forward",
                          "FsdpObserver._pre_step", "FsdpObserver._post_step"})
_EXIT_HOOKS = frozenset({"Observer.at_exit", "FsdpObserver.at_exit"})
MAX_ALARMS = 16
MAX_RECORD = 8 * 1024 * 1024  # the grader drops longer lines; stay under it


def take_token(channel_dir: str, rank: int) -> str:
    """Read this rank's one-time token and remove the file, so later code cannot read it."""
    path = os.path.join(channel_dir, f"token-{rank}")
    try:
        with open(path, encoding="ascii") as f:
            token = f.read().strip()
    except OSError:
        return ""
    try:
        os.unlink(path)
    except OSError:
        pass
    return token


def _plain(value):
    """What ``json.dumps`` cannot encode: numbers stay numbers, anything else a type tag."""
    try:
        if isinstance(value, (int, float)) or hasattr(value, "__float__") and getattr(value, "numel", lambda: 1)() == 1:
            return float(value)
    except Exception:
        pass
    return f"<{type(value).__name__[:40]}>"


_ENCODE = _c_encoder(None, _plain, _c_ascii, None, ":", ",", False, False, True)  # what the gate writes with


def encode(record: dict) -> bytes:
    """One newline-terminated JSON line; never raises on a student's odd values."""
    try:
        data = _dumps(record, separators=(",", ":"), default=_plain, allow_nan=True).encode()
    except (ValueError, TypeError, RecursionError):
        data = _dumps({"type": record.get("type", "?") if isinstance(record, dict) else "?",
                           "unencodable": True}).encode()
    return data + b"\n"


def _from_harness(depth: int = 2) -> bool:
    """Is the caller ``depth`` frames up harness code (not the student's script)?"""
    try:
        return _getframe(depth).f_code.co_filename.startswith(_HERE)
    except ValueError:
        return False


def _from_here(depth: int = 2) -> bool:
    """Is the caller ``depth`` frames up this module (a private record path used by the stream itself)?"""
    try:
        return _getframe(depth).f_code.co_filename == _THIS
    except ValueError:
        return False


def _entered_properly(depth: int = 2) -> bool:
    """Did the chain of harness frames from ``depth`` up start at a legitimate entry point (``_chain_ok``)?"""
    try:
        return _chain_ok(_getframe(depth), _HERE, _THIS, _TORCH, _TORCH_HOOKS, _EXIT_HOOKS)
    except ValueError:
        return False


def _gate(sock, mac, getframe, dumps, here, this, torch_marker, torch_hooks, exit_hooks, dict_type, dict_get, kind_ok):
    """The only holder of the socket, the MAC and the record count: a generator, so that they and
    everything its checks use are locals of a suspended frame (reachable only through ``gi_frame``,
    which the audit hook reports), not attributes or module globals a script could swap.

    ``send((record, sealed))`` writes one record if the chain of frames that asked for it is the
    harness's own (see ``_entered_properly``; an ``integrity`` record from anyone); ``send(("seal",
    None))`` ends the stream. Yields True (written), None (refused) or False (failed, or closed).
    The functions it calls are harness functions whose code a script could swap only with an audited
    assignment to ``__code__`` (reported as ``patch.harness_code``).
    """
    count, result = 0, None
    while sock is not None:
        record, sealed = yield result
        result = False
        f = getframe(1)  # the frame that resumed this generator
        while f is not None and f.f_code.co_filename == this:
            f = f.f_back
        if type(record) is str and record == "seal":  # noqa: E721
            ok = kind_ok(f, here, this, torch_marker, torch_hooks, exit_hooks)
            if ok:
                try:
                    sock.sendall(dumps({"type": "seal", "records": count, "mac": mac.hexdigest()}, 0)[0].encode() + b"\n")
                except OSError:
                    pass
                try:
                    sock.close()
                except OSError:
                    pass
                sock = None
            result = ok
            continue
        if type(record) is not dict_type:  # noqa: E721  (a subclass could lie about its fields)
            result = None
            continue
        if not (dict_get(record, "type") == "integrity" or kind_ok(f, here, this, torch_marker, torch_hooks, exit_hooks)):
            result = None
            continue
        try:
            data = dumps(record, 0)[0].encode()
        except Exception:  # noqa: BLE001  (the gate must survive any value; it never raises)
            data = dumps({"type": str(dict_get(record, "type", "?"))[:40], "unencodable": True}, 0)[0].encode()
        if len(data) > MAX_RECORD:
            data = dumps({"type": str(dict_get(record, "type", "?"))[:40], "oversize": len(data)}, 0)[0].encode()
        data += b"\n"
        try:
            sock.sendall(data)
        except OSError:
            sock = None
            result = False
            continue
        if sealed:
            mac.update(data)
            count += 1
        result = True
    while True:
        yield False


def _chain_ok(f, here, this, torch_marker, torch_hooks, exit_hooks) -> bool:
    """``f`` (the first frame outside this module) is harness code entered at a legitimate point.

    An observer method that torch calls as a registered hook must be named in ``_TORCH_HOOKS``
    (or be a closure): otherwise its records are refused and every honest run is held for review.

    Student code may call a patched function (a closure the harness installed over torch's or a
    builtin's: ``hooked_save``, the DataLoader's ``__next__``...) however it likes: that is the
    observation. It may not call the observers' own methods (``Observer._on_step``,
    ``_close_epoch``, ``_flush_steps``...): those are entered only from torch (registered hooks),
    from C (``atexit``: no Python caller) or from the start-up import of the harness itself.
    Bound into the gate at import, with everything it compares against passed in.
    """
    if f is None or not f.f_code.co_filename.startswith(here):
        return False
    outer, n = None, 0
    while f is not None and f.f_code.co_filename.startswith(here) and n < 200:
        outer, f, n = f, f.f_back, n + 1
    code = outer.f_code
    if "<locals>" in code.co_qualname:
        return True  # a patched entry point, whoever calls it
    if f is None:
        return code.co_qualname in exit_hooks  # atexit, from C
    caller = f.f_code.co_filename
    if caller.startswith("<frozen"):
        return code.co_name == "<module>"  # sitecustomize, imported at start-up
    return code.co_qualname in torch_hooks and caller.startswith(torch_marker)


class Stream:
    """Newline-delimited JSON records to the grader; silently off if it cannot connect.

    The socket, the record count and the MAC live only in the ``_gate`` generator's frame: a
    script that found the stream (through a closure cell) can ask the gate, which checks who is
    asking, but cannot write a record and add it to the seal itself.
    """

    def __init__(self, path: str, token: str, rank: int):
        self.pid = _getpid()
        self._alarmed: dict[str, int] = {}
        self._path, self._rank = path, rank
        sock = None
        try:
            s = _Socket(_AF_UNIX, _SOCK_STREAM)
            s.connect(path)
            os.set_inheritable(s.fileno(), False)
            s.sendall(encode({"type": "hello", "token": token, "rank": rank, "pid": self.pid,
                              "world": int(os.environ.get("WORLD_SIZE", "1")),
                              "local_rank": int(os.environ.get("LOCAL_RANK", "0"))}))
            sock = s
        except OSError:
            pass
        self._gate = _gate(sock, _new_mac(token.encode(), digestmod="sha256"), _getframe, _ENCODE, _HERE, _THIS,
                           _TORCH, _TORCH_HOOKS, _EXIT_HOOKS, dict, dict.get, _chain_ok)
        self._gate.send(None)  # started: suspended at its first yield
        self.open = sock is not None

    def _ask(self, request) -> bool | None:
        """Hand one request to the gate; a gate stopped or busy (re-entered) answers False."""
        try:
            return self._gate.send(request)
        except (StopIteration, ValueError):
            self.open = False
            return False

    def send(self, record: dict) -> None:
        """Send one record; only the rank's own process may (forked workers share the socket)."""
        if not _from_harness():
            self.alarm({"event": "stream.send", "detail": "record sent from outside the harness",
                        "record_type": str(record.get("type"))[:40] if isinstance(record, dict) else "?"})
            return
        if not _entered_properly():
            self.alarm({"event": "stream.entry", "detail": "the observer's own methods called by the script",
                        "record_type": str(record.get("type"))[:40] if isinstance(record, dict) else "?"})
            return
        self._send(record)

    def _send(self, record: dict) -> None:
        if not _from_here():
            self.alarm({"event": "stream._send", "detail": "a private record path called from outside the stream"})
            return
        if _getpid() != self.pid or not self.open:
            return
        if self._ask((record, True)) is None:  # the checks above passed, the gate's own did not
            self.alarm({"event": "stream.gate", "detail": "the stream's checks were bypassed"})

    def alarm(self, event: dict) -> None:
        """Report an integrity event: on this stream if it works here, else on a fresh connection."""
        kind = str(event.get("event", "?"))
        self._alarmed[kind] = self._alarmed.get(kind, 0) + 1
        if self._alarmed[kind] > 1 or len(self._alarmed) > MAX_ALARMS:
            return  # the first of each kind is enough evidence
        # the type last: an event dict carrying its own "type" must not become another kind of record
        event = {**event, "type": "integrity", "rank": self._rank, "pid": _getpid()}
        if self.open and _getpid() == self.pid and self._ask((event, True)):
            return
        send_alarm(self._path, "", self._rank, event)  # no token: the grader counts the connection itself

    def close(self) -> None:
        """End the stream with the seal (record count and MAC); only the harness may."""
        if not _from_harness():
            self.alarm({"event": "stream.close", "detail": "stream closed from outside the harness"})
            return
        if self.open and _getpid() == self.pid:
            self._ask(("seal", None))
            self.open = False


def send_alarm(path: str, token: str, rank: int, event: dict) -> None:
    """A one-record connection whose hello carries the event (the grader records it as tampering)."""
    try:
        s = _Socket(_AF_UNIX, _SOCK_STREAM)
        s.settimeout(2.0)
        s.connect(path)
        s.sendall(encode({"type": "hello", "token": token, "rank": rank, "pid": os.getpid(),
                          "integrity": event}))
        s.close()
    except OSError:
        pass
