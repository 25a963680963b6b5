"""The module that learns, as the grader observes it: not what an optimizer is handed.

A training batch (an image batch of the assignment's shape, with autograd on) enters the model at
the first module called with it; nested modules get the same tensor and are skipped, a module
outside the first one's tree called with the same tensor is a consumer of its own. A consumer
counts once a backward follows its forward (an evaluation forward, or a forward thrown away,
trained nothing). Gradient-sync digests, the (Sync)BatchNorm count, the traffic a correct run
must move and rank 0's model for the grader's evaluation all start from these modules' parameters,
so a tiny DDP head stepped by ``torch.optim`` in front of a model updated by hand, or BatchNorm
weights stepped by a second optimizer, are judged as what they are.

Steps are the optimizer's, and where no optimizer ever steps, the in-place updates of the trained
parameters: a change of their digest between two backward passes is a step taken by hand.
"""
from __future__ import annotations

import weakref

import torch

from distgrade_harness import marks

MAX_CONSUMERS = 16  # distinct modules remembered as having taken a training batch


PER_IMAGE = 3 * marks.SIZE * marks.SIZE


def is_batch(x) -> bool:
    """A batch of the assignment's images, in any layout (N x 3 x 32 x 32, channels last, flattened) and
    any real dtype: what a model that takes the images first receives."""
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.is_complex() or x.dtype == torch.bool:
        return False
    n = x.shape[0]
    return n > 0 and x.numel() == n * PER_IMAGE


def unwrap(module):
    """The model inside DDP, ``torch.compile`` and similar wrappers (their parameters are the same)."""
    for _ in range(4):
        inner = getattr(module, "_orig_mod", None)
        if inner is None and type(module).__name__ == "DistributedDataParallel":
            inner = getattr(module, "module", None)
        if not isinstance(inner, torch.nn.Module):
            return module
        module = inner
    return module


class Trained:
    """Which modules took the training batches and were trained on them. Held strongly (a few modules): the
    script's last reference goes when its ``main()`` returns, and the exit digest and model dump come later."""

    def __init__(self):
        self.counts: dict[int, list] = {}  # id(module) -> [module, batches trained on], first consumer first
        self.pending: list = []  # modules fed since the last backward
        self.last: tuple | None = None  # (weak ref to the last batch tensor, its version, weak ref to its module)
        self._tree: tuple | None = None  # (weak ref to a module, ids of its submodules)

    def pre(self, module, x) -> None:
        """A forward of ``module`` with ``x`` (called from the global pre-hook, under autograd only)."""
        if not is_batch(x):
            return
        last = self.last
        if last is not None and last[0]() is x and last[1] == x._version:
            first = last[2]()
            if first is None or first is module or id(module) in self._subtree(first):
                return  # the same batch passed down inside the model
        self.last = (weakref.ref(x), x._version, weakref.ref(module))
        if not any(m is module for m in self.pending):
            self.pending.append(module)

    def _subtree(self, module) -> set[int]:
        tree = self._tree
        if tree is None or tree[0]() is not module:
            tree = self._tree = (weakref.ref(module), {id(m) for m in module.modules()})
        return tree[1]

    def backward(self) -> None:
        """A backward ran: the modules fed since the last one were trained."""
        pending, self.pending = self.pending, []
        for m in pending:
            if id(m) in self.counts:
                self.counts[id(m)][1] += 1
            elif len(self.counts) < MAX_CONSUMERS:
                self.counts[id(m)] = [m, 1]

    def modules(self) -> list:
        """The trained modules (unwrapped), most-trained first; empty until a backward followed a batch."""
        ranked = sorted(enumerate(self.counts.values()), key=lambda t: (-t[1][1], t[0]))
        out = []
        for _, (m, _) in ranked:
            inner = unwrap(m)
            if not any(inner is o for o in out):
                out.append(inner)
        return out

    def params(self) -> list[torch.Tensor]:
        """Every parameter of every trained module, each once, in module order."""
        seen, out = set(), []
        for m in self.modules():
            for p in m.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
        return out

    def model(self):
        """The module whose weights the grader evaluates: the trained module with the most parameters."""
        mods = self.modules()
        if not mods:
            return None
        return max(mods, key=lambda m: sum(p.numel() for p in m.parameters()))
