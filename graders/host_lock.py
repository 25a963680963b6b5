"""The grading host's lock between gradings (shared) and the reference's calibration (exclusive).

A calibration measures the reference solution's speed with the host to itself, but it never holds
a student's job hostage: it runs only while no grading holds or wants the host,
and gives way within half a second when one arrives (``graders.ddp_speedup.calibration`` stops its current run).
Lock files live in ``<var>/calibration/``.
"""
from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path

from coursework import settings as course_settings


class HostBusy(Exception):
    """A grading holds or wants the host: the calibration gives way and tries again between jobs."""


def _lock_files() -> tuple[Path, Path]:
    d = course_settings.var_dir() / "calibration"
    d.mkdir(parents=True, exist_ok=True)
    return d / "grading.lock", d / "host.lock"


@contextlib.contextmanager
def host_shared(on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Held by a grading while its runs are timed. Gradings share the host; a calibration gives way.

    ``grading.lock`` (shared) says a grading wants the host: a running calibration sees it within
    half a second, ends its current run and lets go of ``host.lock``. ``on_wait`` is called once if
    the grading has to wait for that (seconds, never a whole calibration).
    """
    want_path, host_path = _lock_files()
    with open(want_path, "a") as want, open(host_path, "a") as host:
        fcntl.flock(want, fcntl.LOCK_SH)  # never blocks: a calibration only probes this lock
        try:
            try:
                fcntl.flock(host, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait:
                    on_wait()
                fcntl.flock(host, fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(host, fcntl.LOCK_UN)
        finally:
            fcntl.flock(want, fcntl.LOCK_UN)


def grading_wants_host() -> bool:
    """Does a grading hold or wait for the host? (Probed, never held: gradings must not wait on it.)"""
    want_path, _ = _lock_files()
    with open(want_path, "a") as want:
        try:
            fcntl.flock(want, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(want, fcntl.LOCK_UN)
        return False


@contextlib.contextmanager
def host_exclusive() -> Iterator[None]:
    """Held while calibrating, only while no grading holds or wants the host; raises HostBusy otherwise."""
    _, host_path = _lock_files()
    with open(host_path, "a") as host:
        try:
            fcntl.flock(host, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HostBusy("a grading holds the host") from None
        try:
            if grading_wants_host():
                raise HostBusy("a grading wants the host")
            yield
        finally:
            fcntl.flock(host, fcntl.LOCK_UN)
