"""What each rank put into its update, and what update it applied: linear sketches the grader compares across ranks.

Synchronised data-parallel training applies, on every rank, the mean of the ranks' local gradients (or, averaging
the parameters after a local step, the mean of the ranks' stepped parameters). Which collective does it does not
matter (DDP, an all_reduce, reduce then broadcast, all_gather then a mean, a comm hook); what matters is that each
rank's local work reached the update. A sketch here is a fixed linear map of a list of tensors to ``K`` numbers
(random signs over at most ``SUB`` sampled elements of each tensor), so the sketch of a mean is the mean of the
sketches: the grader checks, step by step, that

* the gradient a rank's optimizer applied (``ga``, read as its step begins) is a positive multiple of the mean of
  the ranks' local gradients (``gl``, read when backward returned, before any hand-written collective); a multiple,
  because gradient clipping after the sync scales it alike on every rank; or
* the parameters after the step span (``ps``, once the script's own averaging ran) are the mean of what the ranks
  held right after their optimizer step (``pl``);

and that no rank's local gradient is zero (``gn``: its squared norm, ``gz``: how many of its tensors are all zero; under
DDP the buckets' local contents before the all-reduce, which is the only place DDP's local gradient exists). Broadcasting rank 0's weights, or rank 0's
gradients, discards the others' work and matches neither; a rank that backpropagates ``loss * 0`` sends zeros.

Like every in-process reading this can be forged by a script that has read it; the grader checks it against the
parameter digests of every step and the traffic between the ranks seen from outside.
"""
from __future__ import annotations

import torch

K = 8  # numbers per sketch
SUB = 4096  # elements sampled per tensor (all of a smaller one)
_SEED = 0x5EED


class Sketcher:
    """The fixed linear map, built lazily per (position, size, device) of the tensors it is given."""

    def __init__(self):
        self._maps: dict[tuple, tuple] = {}

    def _map(self, i: int, n: int, device) -> tuple:
        key = (i, n, str(device))
        got = self._maps.get(key)
        if got is None:
            gen = torch.Generator().manual_seed(_SEED + 7919 * i + n)
            idx = torch.randperm(n, generator=gen)[:SUB] if n > SUB else None
            m = SUB if n > SUB else n
            signs = torch.randint(0, 2, (K, m), generator=gen, dtype=torch.float64).mul_(2).sub_(1)
            got = (idx.to(device) if idx is not None else None, signs.to(device))
            if len(self._maps) < 4096:
                self._maps[key] = got
        return got

    def sketch(self, tensors) -> list[float] | None:
        """``K`` floats (None where no tensor was given); a tensor that is None (no gradient) counts as zeros."""
        total = None
        with torch.no_grad():
            for i, t in enumerate(tensors):
                if t is None:
                    continue
                t = t.detach()
                t = t.to_local() if hasattr(t, "to_local") else t
                if not t.numel() or t.is_sparse:
                    continue
                flat = t.reshape(-1)
                idx, signs = self._map(i, flat.numel(), flat.device)
                part = signs @ (flat[idx] if idx is not None else flat).double()
                total = part if total is None else total + part.to(total.device)
        if total is None:
            return None
        out = [float(f"{v:.9g}") for v in total.cpu().tolist()]
        return out if all(v - v == 0 for v in out) else None  # a diverged run's NaN is no reading


def zero_tensors(tensors, lazy: bool = False):
    """How many of ``tensors`` (gradients) are all zero: a rank that backpropagated ``loss * 0`` has zeros at least in
    every layer after the last SyncBatchNorm (whose backward passes the other ranks' signal on into the ones before)."""
    with torch.no_grad():
        sums = [t.detach().abs().sum() for t in tensors if t is not None and t.numel() and not t.is_sparse]
        if not sums:
            return torch.zeros((), dtype=torch.int64) if lazy else 0
        count = (torch.stack([x.to(sums[0].device).double() for x in sums]) == 0).sum()
        return count if lazy else int(count)  # lazy: a tensor on the gradients' device


def squared_norm(tensors) -> float:
    """The squared L2 norm of all ``tensors`` together (None entries: zero)."""
    total = 0.0
    with torch.no_grad():
        for t in tensors:
            if t is not None and t.numel() and not t.is_sparse:
                t = t.detach()
                t = t.to_local() if hasattr(t, "to_local") else t
                total += float(t.double().pow(2).sum())
    return total
