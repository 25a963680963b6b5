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
    """The fixed linear map: one matrix of random signs for every tensor, applied to positions drawn per (position in
    the list, size, device) of the tensors it is given. What it keeps is small (the signs once, 16 KB of positions a
    tensor), as homework 3 reads the rank's memory with the harness inside it."""

    def __init__(self):
        self._maps: dict[tuple, torch.Tensor | None] = {}
        self._signs: dict[str, torch.Tensor] = {}

    def _map(self, i: int, n: int, device) -> tuple:
        key = (i, n, str(device))
        if key not in self._maps:
            gen = torch.Generator().manual_seed(_SEED + 7919 * i + n)
            # SUB positions drawn with replacement: a permutation of a whole flat FSDP shard (26 MB of indices for
            # 3.3 million elements) was counted by homework 3's memory reading as the student's peak
            idx = torch.randint(0, n, (SUB,), generator=gen, dtype=torch.int32).to(device) if n > SUB else None
            if len(self._maps) >= 4096:
                return idx, self._signs_on(device)
            self._maps[key] = idx
        return self._maps[key], self._signs_on(device)

    def _signs_on(self, device) -> torch.Tensor:
        signs = self._signs.get(str(device))
        if signs is None:
            gen = torch.Generator().manual_seed(_SEED)
            signs = self._signs[str(device)] = torch.randint(0, 2, (K, SUB), generator=gen, dtype=torch.float64).mul_(2).sub_(1).to(device)
        return signs

    def sketch(self, tensors) -> list[float] | None:
        """``K`` floats (None where no tensor was given); a tensor that is None (no gradient) counts as zeros."""
        total = None
        with torch.no_grad():
            for i, t in enumerate(tensors):
                if t is None:
                    continue
                t = _local(t)
                if not t.numel() or t.is_sparse:
                    continue
                flat = t.reshape(-1)
                idx, signs = self._map(i, flat.numel(), flat.device)
                picked = flat[idx.long()] if idx is not None else flat
                part = signs[:, :picked.numel()] @ picked.double()
                total = part if total is None else total + part.to(total.device)
        if total is None:
            return None
        out = [float(f"{v:.9g}") for v in total.cpu().tolist()]
        return out if all(v - v == 0 for v in out) else None  # a diverged run's NaN is no reading


def zero_tensors(tensors, lazy: bool = False):
    """How many of ``tensors`` (gradients) are all zero: a rank that backpropagated ``loss * 0`` has zeros at least in
    every layer after the last SyncBatchNorm (whose backward passes the other ranks' signal on into the ones before)."""
    with torch.no_grad():  # reductions only: no copy the size of a gradient (homework 3 counts the rank's memory)
        nonzero = [_local(t).any() for t in tensors if t is not None and t.numel() and not t.is_sparse]
        if not nonzero:
            return torch.zeros((), dtype=torch.int64) if lazy else 0
        count = (~torch.stack([x.to(nonzero[0].device) for x in nonzero])).sum()
        return count if lazy else int(count)  # lazy: a tensor on the gradients' device


def squared_norm(tensors) -> float:
    """The squared L2 norm of all ``tensors`` together (None entries: zero)."""
    parts = []
    with torch.no_grad():
        for t in tensors:
            if t is not None and t.numel() and not t.is_sparse:
                parts.append(torch.linalg.vector_norm(_local(t)).double().square())  # a reduction: no copy of the gradient
    # one read at the end: on a GPU, a float() per tensor would wait for the device once per parameter
    return float(torch.stack([p.to(parts[0].device) for p in parts]).sum()) if parts else 0.0


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of a (possibly sharded) tensor: nothing here may start a collective."""
    t = t.detach()
    return t.to_local() if hasattr(t, "to_local") else t
