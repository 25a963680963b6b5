"""Reading files that student code could have created, replaced or planted.

The grader runs as root and reads a job's log and stack-dump folders after the run;
the student's processes could write there. A symlink planted as ``stack-rank0.txt``
must not copy ``/etc/shadow`` into the report, a FIFO must not block the grader, and
a huge file must not be read whole. So every path component is opened with
``O_NOFOLLOW`` relative to its parent's descriptor, only regular files with a single
link are read, and never more than a given number of bytes.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO's open returns
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


@contextmanager
def open_dir(path: str | os.PathLike[str], dir_fd: int | None = None) -> Iterator[int | None]:
    """A descriptor of directory ``path`` (not through a symlink), or None if it is not one."""
    try:
        fd = os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def list_names(dir_fd: int, limit: int) -> list[str]:
    """The sorted names of at most ``limit`` entries of a directory (a planted million stays cheap)."""
    names = []
    with os.scandir(dir_fd) as it:
        for entry in it:
            names.append(entry.name)
            if len(names) >= limit:
                break
    return sorted(names)


def read_text(path: str | os.PathLike[str], limit: int, *, tail: bool = False,
              dir_fd: int | None = None) -> str | None:
    """At most ``limit`` bytes of a regular file as text: its head, or its tail with ``tail``.

    None for a symlink, a FIFO, a device, a directory, a hard-linked file or a missing one.
    """
    try:
        fd = os.open(path, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # a hard link could name another file
            return None
        if tail and st.st_size > limit:
            os.lseek(fd, st.st_size - limit, os.SEEK_SET)
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def read_under(root: Path, parts: list[str], limit: int, *, tail: bool = False) -> str | None:
    """``read_text`` of ``root/parts[0]/.../parts[-1]`` where no component may be a symlink."""
    if not parts:
        return None
    with open_dir(root) as fd:
        return _read_at(fd, parts, limit, tail)


def _read_at(fd: int | None, parts: list[str], limit: int, tail: bool) -> str | None:
    if fd is None:
        return None
    if len(parts) == 1:
        return read_text(parts[0], limit, tail=tail, dir_fd=fd)
    with open_dir(parts[0], dir_fd=fd) as sub:
        return _read_at(sub, parts[1:], limit, tail)
