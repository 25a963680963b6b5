"""Each rank's output as the launcher captured it: lines, redraws and bytes of stdout and stderr.

torchrun (``--redirects 3``) writes every rank's fd 1 and 2 to ``<log dir>/<run id>/attempt_0/<rank>/``.
The counts include whatever reached those descriptors (``print``, ``sys.stdout.write``,
``os.write(1, ...)``, a C library), so they do not depend on which Python function the script
called. The files are in a student-writable folder: they are read as untrusted and with a cap.

A progress bar (tqdm, or a hand-written ``\r`` line) redraws one line in place: a terminal shows one
line, but each redraw is output the rank wrote, so a ``\r`` not followed by ``\n`` counts as a
``redraw``. Lines and redraws can both be dodged (one endless line, or none at all), bytes cannot.

A line per epoch is output whichever descriptor it went to (``sys.stderr.write``, ``os.write(2, ...)``,
``print(file=open("/dev/stderr", "w"))``), so stderr is read for recurring lines as well. Libraries write
there too, and a warning raised again (a DataLoader worker's, each epoch) repeats one text; a log line
repeats its shape with other numbers. So on stderr a shape counts only where its lines differ once the
prefix a logger puts before them (``[W1207 10:38:19.56 812 file.cpp:12]``, ``[rank1]:``, or the ``file.py:431:``
location of a Python warning) is set aside: that prefix carries a clock or a line number, the rest of a warning
raised twice does not.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from coursework.report import text
from graders.evidence import SOURCE_OUTSIDE
from graders.sandbox import untrusted

MAX_READ = 64 * 1024 * 1024  # per file; beyond it lines are estimated from the bytes read
MAX_SHAPES = 4096  # distinct line shapes remembered per file (a bounded dictionary whatever the rank wrote)
SHAPE_CHARS = 160  # characters of a line that decide its shape
_DIGITS = bytes.maketrans(b"0123456789", b"##########")
# What loggers put before a line (glog's "[W1207 10:38:19.567 812 file.cpp:12] ", torch's "[rank1]:", Python
# logging's "W1207 10:38:19.567000 812 torch/_dynamo/utils.py:1] "): a clock and a pid that differ on every line.
# Only these: a bracket of the script's own ("[epoch 3/10] done") is part of its line.
_LOGGER_PREFIX = re.compile(rb"^(?:\s*(?:\[rank\d+\]:|\[?[IWEF]\d{4} \d\d:\d\d:\d\d[.\d]*(?: +\d+)? [^\]\n]{0,200}\]))+"
                            # and the location Python's warnings put before a warning's message ("/.../dataloader.py:431:
                            # UserWarning: ..."): one warning raised from two lines of a library is one text
                            rb"|^\s*[^\s:]{1,300}\.py:\d+: (?=[A-Za-z_]\w{0,60}Warning: )")


def _shape(line: bytes) -> bytes:
    """A line with its numbers blanked: "epoch 0: loss 2.1" and "epoch 1: loss 1.9" have one shape."""
    return line[:SHAPE_CHARS].translate(_DIGITS).strip()


def recurring(path_fd: int | None, name: str, varied: bool = False) -> int:
    """Lines of one captured file whose shape comes back (a line per epoch or per step, whichever function
    wrote it); a start-up banner and a closing line have shapes of their own. ``varied``: only shapes whose
    lines differ past a logger's prefix (a warning raised again repeats its text; a log line its shape with
    other numbers). 0 when absent or unreadable."""
    if path_fd is None:
        return 0
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=path_fd)
    except OSError:
        return 0
    shapes: dict[bytes, int] = {}
    texts: dict[bytes, set[bytes]] = {}  # shape -> up to two distinct texts past the prefix
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0
        read, rest = 0, b""
        while read < MAX_READ:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            read += len(chunk)
            *lines, rest = (rest + chunk).split(b"\n")
            rest = rest[-SHAPE_CHARS:]
            for line in lines:
                last = line.rsplit(b"\r", 1)[-1]
                key = _shape(last)
                if key and (key in shapes or len(shapes) < MAX_SHAPES):
                    shapes[key] = shapes.get(key, 0) + 1
                    seen = texts.setdefault(key, set())
                    if len(seen) < 2:
                        seen.add(_LOGGER_PREFIX.sub(b"", last[:SHAPE_CHARS + 512])[:SHAPE_CHARS].strip())  # a long path too
    except OSError:
        pass
    finally:
        os.close(fd)
    return sum(n for key, n in shapes.items() if n > 1 and (not varied or len(texts[key]) > 1))


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
    """``{"source", "ranks": {rank: {"stdout_lines", "stdout_redraws", "stdout_bytes", "stderr_lines", ...,
    "stdout_recurring", "stderr_recurring"}}}``."""
    ranks: dict[int, dict[str, int]] = {r: {f"{kind}_{what}": 0 for kind in ("stdout", "stderr")
                                            for what in ("lines", "redraws", "bytes")} | {"stdout_recurring": 0, "stderr_recurring": 0}
             for r in range(nproc)}
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
                        ranks[r]["stdout_recurring"] += recurring(rfd, "stdout.log")
                        ranks[r]["stderr_recurring"] += recurring(rfd, "stderr.log", varied=True)
    return {"source": SOURCE_OUTSIDE, "what": text("torchrun 截获的各 rank 标准输出与标准错误", "each rank's stdout/stderr as torchrun captured it"), "ranks": ranks}


class _none:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
