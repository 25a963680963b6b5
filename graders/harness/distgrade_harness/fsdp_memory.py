"""Live tensor bytes of one CPU process, counted where they are allocated.

On a CPU host there is no allocator limit and RSS does not follow sharding, so the
FSDP grader counts the bytes of every live tensor storage itself: a
``TorchDispatchMode`` sees each storage an op creates (through tensor subclasses such
as DTensor down to their local tensors), a weak reference notices when it dies, and
``UntypedStorage.resize_`` (how FSDP frees and re-allocates gathered parameters) is
followed too. ``peak`` is the most bytes alive at once since the last ``reset_peak``,
the CPU stand-in for ``torch.cuda.max_memory_allocated``.

A dispatch mode is thread-local: entered in the main thread only, it would not see a model trained in
a ``threading.Thread`` (that run "peaked at 0 B"). So the counter is one ``LiveBytes`` for the
process, and every thread runs under a mode of its own that feeds it: the main thread from ``start``,
every thread started afterwards (``threading`` or ``_thread``) from its first instruction. A thread
that escapes anyway still leaves its states live at the step, and the grader holds a peak below
them as a contradiction (``graders.fsdp_fit.checks``).
"""
from __future__ import annotations

import threading
import weakref

import torch
from torch.utils._python_dispatch import (TorchDispatchMode, _get_current_dispatch_mode_stack,
                                          is_traceable_wrapper_subclass)
from torch.utils._pytree import tree_leaves


def storages_of(t: torch.Tensor) -> list[torch.UntypedStorage]:
    """The real storages behind a tensor (a DTensor's local shard, not its wrapper)."""
    if is_traceable_wrapper_subclass(t):
        inner, _ = t.__tensor_flatten__()
        parts = [getattr(t, name, None) for name in inner]
        return [s for part in parts if isinstance(part, torch.Tensor) for s in storages_of(part)]
    if t.device.type == "meta" or type(t).__name__ == "FakeTensor":
        return []
    try:
        return [t.untyped_storage()]
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return []


class LiveBytes:
    """Counts live storage bytes that ops create in any thread; ``peak`` is their maximum."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}  # storage impl address -> bytes
        self.refs: dict[int, weakref.ref] = {}
        self.live = 0
        self.peak = 0
        self.lock = threading.Lock()

    def observe(self, func, args, kwargs, out) -> None:
        """Count what one op created (and grew, for in-place and out= ops)."""
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                for st in storages_of(leaf):
                    self.track(st)
        if func._schema.is_mutable:  # in-place and out= ops may grow their storages
            for leaf in tree_leaves((args, kwargs)):
                if isinstance(leaf, torch.Tensor):
                    for st in storages_of(leaf):
                        self.track(st)

    def track(self, st: torch.UntypedStorage) -> None:
        """Start counting a storage, or update its size if already counted."""
        key = st._cdata
        size = st.nbytes()
        with self.lock:
            old = self.sizes.get(key)
            if old is None:
                ref = self.refs.get(key)
                if ref is not None and ref() is st:
                    old = 0
                else:
                    self.refs[key] = weakref.ref(st, lambda _r, k=key: self._forget(k))
                    old = 0
            self.sizes[key] = size
            self.live += size - old
            if self.live > self.peak:
                self.peak = self.live

    def _forget(self, key: int) -> None:
        with self.lock:
            self.live -= self.sizes.pop(key, 0)
            self.refs.pop(key, None)

    def reset_peak(self) -> int:
        """Return the peak since the last reset and start a new window at the current level."""
        with self.lock:
            peak, self.peak = self.peak, self.live
        return peak


class _ThreadMode(TorchDispatchMode):
    """One thread's mode (a mode is entered per thread), feeding the process's counter."""

    def __init__(self, counter: LiveBytes) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.counter.observe(func, args, kwargs, out)
        return out


_active: LiveBytes | None = None
_entered = threading.local()


def _enter_here() -> None:
    """Enter a mode feeding the counter in the calling thread, once."""
    if _active is not None and not getattr(_entered, "mode", None):
        _entered.mode = _ThreadMode(_active)
        _entered.mode.__enter__()


def counting_here() -> bool:
    """Is a mode feeding the counter on this thread's dispatch-mode stack now, with the Python dispatch key
    that reaches it not excluded? A script that pops the modes (``_disable_current_modes``), or leaves them
    on the stack and excludes the key (``torch._C._DisableTorchDispatch()``, an ``_ExcludeDispatchKeyGuard``),
    allocates where nothing counts."""
    if _active is None:
        return True
    try:
        stack = _get_current_dispatch_mode_stack()
        if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
            return False  # the mode is on the stack, but no op reaches it
    except Exception:  # the private API moved: nothing can be said
        return True
    # the class itself: a subclass that counts nothing would otherwise stand in for it
    return any(type(m) is _ThreadMode and m.counter is _active for m in stack)


def _counted(start_new_thread):
    """``_thread.start_new_thread`` whose thread enters the counting mode before its function runs."""
    def start(function, args=(), kwargs=None, *rest):
        def run(*a, **kw):
            _enter_here()
            return function(*a, **kw)
        return start_new_thread(run, args, kwargs or {}, *rest)
    return start


def _resize(original):
    def resize_(storage, nbytes):
        result = original(storage, nbytes)
        if _active is not None:
            _active.track(storage)
        return result
    return resize_


def start() -> LiveBytes:
    """Start the process-wide counter: this thread and every thread started later count into it, and
    storage resizes are followed; idempotent."""
    global _active
    if _active is None:
        import _thread

        _active = LiveBytes()
        torch.UntypedStorage.resize_ = _resize(torch.UntypedStorage.resize_)
        # threading keeps its own reference to the function it starts threads with: replace both
        counted = _counted(_thread.start_new_thread)
        _thread.start_new_thread = _thread.start_new = counted
        threading._start_new_thread = counted
        _enter_here()
    return _active
