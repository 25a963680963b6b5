"""Live tensor bytes of one CPU process, counted where they are allocated.

On a CPU host there is no allocator limit and RSS does not follow sharding, so the
FSDP grader counts the bytes of every live tensor storage itself: a
``TorchDispatchMode`` sees each storage an op creates (through tensor subclasses such
as DTensor down to their local tensors), a weak reference notices when it dies, and
``UntypedStorage.resize_`` (how FSDP frees and re-allocates gathered parameters) is
followed too. ``peak`` is the most bytes alive at once since the last ``reset_peak``,
the CPU stand-in for ``torch.cuda.max_memory_allocated``.
"""
from __future__ import annotations

import threading
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
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


class LiveBytes(TorchDispatchMode):
    """Counts live storage bytes created while it is active; ``peak`` is their maximum."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[int, int] = {}  # storage impl address -> bytes
        self.refs: dict[int, weakref.ref] = {}
        self.live = 0
        self.peak = 0
        self.lock = threading.Lock()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                for st in storages_of(leaf):
                    self.track(st)
        if func._schema.is_mutable:  # in-place and out= ops may grow their storages
            for leaf in tree_leaves((args, kwargs)):
                if isinstance(leaf, torch.Tensor):
                    for st in storages_of(leaf):
                        self.track(st)
        return out

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


_active: LiveBytes | None = None


def _resize(original):
    def resize_(storage, nbytes):
        result = original(storage, nbytes)
        if _active is not None:
            _active.track(storage)
        return result
    return resize_


def start() -> LiveBytes:
    """Enter a process-wide counter in this thread and follow storage resizes; idempotent."""
    global _active
    if _active is None:
        _active = LiveBytes()
        torch.UntypedStorage.resize_ = _resize(torch.UntypedStorage.resize_)
        _active.__enter__()
    return _active
