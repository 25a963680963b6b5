"""Client side of the grader's record channel: one unix-socket stream per rank."""
from __future__ import annotations

import json
import os
import socket


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


class Stream:
    """Newline-delimited JSON records to the grader; silently off if it cannot connect."""

    def __init__(self, path: str, token: str, rank: int):
        self.pid = os.getpid()
        self.sock: socket.socket | None = None
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.set_inheritable(False)
            self.sock = s
        except OSError:
            return
        self.send({"type": "hello", "token": token, "rank": rank, "pid": self.pid,
                   "world": int(os.environ.get("WORLD_SIZE", "1")),
                   "local_rank": int(os.environ.get("LOCAL_RANK", "0"))})

    def send(self, record: dict) -> None:
        """Send one record; only the rank's own process may (forked workers share the socket)."""
        if self.sock is None or os.getpid() != self.pid:
            return
        try:
            self.sock.sendall(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        except OSError:
            self.sock = None

    def close(self) -> None:
        if self.sock is not None and os.getpid() == self.pid:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
