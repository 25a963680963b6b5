"""Each rank's output as the launcher captured it: lines, redraws and bytes of stdout and stderr.

torchrun (``--redirects 3``) writes every rank's fd 1 and 2 to ``<log dir>/<run id>/attempt_0/<rank>/``.
The counts include whatever reached those descriptors (``print``, ``sys.stdout.write``,
``os.write(1, ...)``, a C library), so they do not depend on which Python function the script
called. The files are in a student-writable folder: they are read as untrusted and with a cap.

A progress bar (tqdm, or a hand-written ``\r`` line) redraws one line in place: a terminal shows one
line, but each redraw is output the rank wrote, so a ``\r`` not followed by ``\n`` counts as a
``redraw``. Lines and redraws can both be dodged (one endless line, or none at all), bytes cannot.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from coursework.report import text
from graders.evidence import SOURCE_OUTSIDE
from graders.sandbox import untrusted

MAX_READ = 64 * 1024 * 1024  # per file; beyond it lines are estimated from the bytes read


def count(path_fd: int | None, name: str) -> tuple[int, int, int]:
    """(lines, redraws, bytes) of one regular file under ``path_fd`` (zeros when absent or not a file)."""
    if path_fd is None:
        return 0, 0, 0
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=path_fd)
    except OSError:
        return 0, 0, 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return 0, 0, 0
        lines, redraws, read, last = 0, 0, 0, b""
        while read < MAX_READ:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            joined = last + chunk  # a \r\n split across two reads is one line end
            lines += chunk.count(b"\n")
            redraws += joined.count(b"\r") - joined.count(b"\r\n") - (last == b"\r")
            last = chunk[-1:]
            read += len(chunk)
        if st.st_size > read and read:  # capped: estimate from the density read so far
            lines, redraws = int(lines * st.st_size / read), int(redraws * st.st_size / read)
        return lines, redraws, st.st_size
    except OSError:
        return 0, 0, 0
    finally:
        os.close(fd)


def rank_outputs(logs: Path, nproc: int) -> dict:
    """``{"source", "ranks": {rank: {"stdout_lines", "stdout_redraws", "stdout_bytes", "stderr_lines", ...}}}``."""
    ranks: dict[int, dict[str, int]] = {r: {f"{kind}_{what}": 0 for kind in ("stdout", "stderr")
                                            for what in ("lines", "redraws", "bytes")} for r in range(nproc)}
    with untrusted.open_dir(logs) as fd:
        run_ids = untrusted.list_names(fd, 8) if fd is not None else []
        for run_id in run_ids:
            with untrusted.open_dir(run_id, dir_fd=fd) as run_fd, \
                    untrusted.open_dir("attempt_0", dir_fd=run_fd) if run_fd is not None else _none() as att:
                for r in range(nproc):
                    with untrusted.open_dir(str(r), dir_fd=att) if att is not None else _none() as rfd:
                        for kind in ("stdout", "stderr"):
                            lines, redraws, size = count(rfd, f"{kind}.log")
                            ranks[r][f"{kind}_lines"] += lines
                            ranks[r][f"{kind}_redraws"] += redraws
                            ranks[r][f"{kind}_bytes"] += size
    return {"source": SOURCE_OUTSIDE, "what": text("torchrun 截获的各 rank 标准输出与标准错误", "each rank's stdout/stderr as torchrun captured it"), "ranks": ranks}


class _none:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
