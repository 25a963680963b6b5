"""Child processes that cannot outlive their parent."""
from __future__ import annotations

import ctypes
import signal
from typing import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` that asks the kernel to send ``sig`` to the child when its parent dies.

    This covers the case no handler can: the parent being SIGKILLed (or OOM-killed).
    """
    def apply() -> None:
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
        except OSError:  # not glibc/Linux: the parent's own shutdown path still applies
            pass
    return apply
