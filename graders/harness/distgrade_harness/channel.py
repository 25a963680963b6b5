"""Client side of the grader's record channel: one unix-socket stream per rank.

The stream is the harness's only way out, so it is also what a student would try to
forge records through. Defences here (the rest is in ``audit`` and on the grader's side):

* ``send`` accepts records only when called from harness code; a call from anywhere else
  (the student found the object) is itself reported as an integrity event;
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

import _socket
import hmac
import json
import os
import sys

# Bound at import, before student code: the script may replace ``json.dumps`` or methods of
# ``socket.socket`` (a Python class) to filter what the harness says; ``_socket.socket`` is a
# built-in type whose methods cannot be replaced.
_dumps = json.dumps
_Socket = _socket.socket
_AF_UNIX, _SOCK_STREAM = _socket.AF_UNIX, _socket.SOCK_STREAM
_new_mac = hmac.new
_getframe = sys._getframe

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package and its sitecustomize
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


class Stream:
    """Newline-delimited JSON records to the grader; silently off if it cannot connect."""

    def __init__(self, path: str, token: str, rank: int):
        self.pid = os.getpid()
        self.sock: _Socket | None = None
        self.count = 0
        self._alarmed: dict[str, int] = {}
        self._path, self._rank = path, rank
        self._mac = _new_mac(token.encode(), digestmod="sha256")
        try:
            s = _Socket(_AF_UNIX, _SOCK_STREAM)
            s.connect(path)
            os.set_inheritable(s.fileno(), False)
            self.sock = s
        except OSError:
            return
        self._write({"type": "hello", "token": token, "rank": rank, "pid": self.pid,
                     "world": int(os.environ.get("WORLD_SIZE", "1")),
                     "local_rank": int(os.environ.get("LOCAL_RANK", "0"))}, sealed=False)

    def send(self, record: dict) -> None:
        """Send one record; only the rank's own process may (forked workers share the socket)."""
        if not _from_harness():
            self.alarm({"event": "stream.send", "detail": "record sent from outside the harness",
                        "record_type": str(record.get("type"))[:40] if isinstance(record, dict) else "?"})
            return
        self._send(record)

    def _send(self, record: dict) -> None:
        if self.sock is None or os.getpid() != self.pid:
            return
        if self._write(record):
            self.count += 1

    def _write(self, record: dict, sealed: bool = True) -> bool:
        data = encode(record)
        if len(data) > MAX_RECORD:
            data = encode({"type": record.get("type"), "oversize": len(data)})
        try:
            self.sock.sendall(data)
        except OSError:
            self.sock = None
            return False
        if sealed:
            self._mac.update(data)
        return True

    def alarm(self, event: dict) -> None:
        """Report an integrity event: on this stream if it works here, else on a fresh connection."""
        kind = str(event.get("event", "?"))
        self._alarmed[kind] = self._alarmed.get(kind, 0) + 1
        if self._alarmed[kind] > 1 or len(self._alarmed) > MAX_ALARMS:
            return  # the first of each kind is enough evidence
        event = {"type": "integrity", "rank": self._rank, "pid": os.getpid(), **event}
        if self.sock is not None and os.getpid() == self.pid and self._write(event):
            self.count += 1
            return
        send_alarm(self._path, "", self._rank, event)  # no token: the grader counts the connection itself

    def close(self) -> None:
        if not _from_harness():
            self.alarm({"event": "stream.close", "detail": "stream closed from outside the harness"})
            return
        if self.sock is not None and os.getpid() == self.pid:
            self._write({"type": "seal", "records": self.count, "mac": self._mac.hexdigest()}, sealed=False)
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None


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
