"""Where each value of the trained model sits: a signed sum weighted by every element's position.

The grader compares a full checkpoint with the model that trained by sums. An absolute sum cannot see order: a
checkpoint whose rows were interleaved (shards concatenated on the wrong dimension) holds the same values and the
same sum. ``order_sum`` weights element ``[r, c]`` of a parameter viewed as ``[rows, rest]`` by ``row_sign(r) *
col_sign(c)`` (a fixed pseudo-random +-1 of the global position), so every rank's shard adds up to the whole
tensor's sum, and values moved to other rows or columns change it by a normal draw of about 1.4 times their L2 norm.
A draw can land near zero (3% of them within 0.05 of the norm), so there are ``PATTERNS`` independent sign
patterns, four sums: all four near zero is a one-in-a-million chance.

The grader's sandboxed reader (``graders/evidence/checkpoint_sums.py``) computes the same sum on the file and
keeps its own copy of ``signs``: it runs standalone. ``tests/graders/test_order_sum.py`` holds the two equal.

Homework 3 counts every tensor the harness allocates as the student's memory: the sum is a matrix-vector product
of the shard with a ``rest``-long sign vector, then a dot with a ``rows``-long one; nothing as large as the shard.
"""
from __future__ import annotations

import math

import torch

ROW_SALT, COL_SALT = 0x5BD1, 0x2C9F  # different salts: a transposed square matrix does not keep its sums
PATTERNS = 4
_MASK = 2 ** 31 - 1


def signs(start: int, stop: int, salt: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """``[stop - start, PATTERNS]`` of +-1 for the positions ``start .. stop-1``, pattern ``k`` hashed from
    ``position + salt + k * 2**24`` (xor-shift and multiply in 31 bits: no int64 overflow on any device)."""
    idx = torch.arange(start, stop, dtype=torch.int64, device=device)[:, None]
    h = (idx + salt + torch.arange(PATTERNS, dtype=torch.int64, device=device)[None, :] * 2 ** 24) & _MASK
    h = ((h ^ (h >> 15)) * 0x2C1B3C6D) & _MASK
    h = ((h ^ (h >> 12)) * 0x297A2D39) & _MASK
    h = h ^ (h >> 15)
    return (1 - 2 * ((h >> 17) & 1)).to(dtype)


def order_sum(values: torch.Tensor, start: int, rest: int) -> list[float]:
    """The ``PATTERNS`` signed sums of ``values``, the elements ``start .. start + numel - 1`` of a tensor flattened
    row by row whose rows hold ``rest`` elements: a partial first row, whole rows, a partial last row."""
    flat = values.detach().reshape(-1)
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    rest = max(int(rest), 1)
    end = start + flat.numel()
    total = torch.zeros(PATTERNS, dtype=torch.float64, device=flat.device)

    def partial(seg, row, col):  # part of one row: its elements times the column signs, times the row's sign
        cols = signs(col, col + seg.numel(), COL_SALT, seg.device, seg.dtype)
        return (seg[None, :] @ cols)[0].double() * signs(row, row + 1, ROW_SALT, seg.device, torch.float64)[0]
    head_end = min(end, -(-start // rest) * rest)
    if head_end > start:  # the end of the row the values begin in
        total += partial(flat[: head_end - start], start // rest, start % rest)
    body_end = max(head_end, (end // rest) * rest)
    if body_end > head_end:  # whole rows: one product with a [rest, PATTERNS] matrix
        block = flat[head_end - start: body_end - start].reshape(-1, rest)
        per_row = block @ signs(0, rest, COL_SALT, block.device, block.dtype)
        rows = signs(head_end // rest, body_end // rest, ROW_SALT, per_row.device, torch.float64)
        total += (per_row.double() * rows).sum(dim=0)
    if end > body_end:  # the start of the row the values end in
        total += partial(flat[body_end - start:], body_end // rest, 0)
    return [float(x) for x in total]


def rest_of(shape) -> int:
    """Elements in one row of a tensor of ``shape`` viewed as ``[shape[0], rest]``."""
    return math.prod(int(d) for d in tuple(shape)[1:]) if len(tuple(shape)) > 1 else 1


def _add(a: list[float], b: list[float]) -> list[float]:
    return [x + y for x, y in zip(a, b)]


def _squares(t: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(t.detach().reshape(-1), dtype=None)) ** 2 if t.numel() else 0.0


def _dtensor_part(p) -> tuple[torch.Tensor, int] | None:
    """A DTensor's local shard and the flat position it starts at, or None where the shard is not a block of
    whole rows (sharded on another dimension than the first)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    local = p.to_local()
    shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
    if tuple(shape) != tuple(local.shape) or any(offset[1:]) or tuple(shape[1:]) != tuple(p.shape[1:]):
        return None
    return local, int(offset[0]) * rest_of(p.shape) if len(p.shape) else 0


def model_order(root: torch.nn.Module) -> dict | None:
    """``{"order": [PATTERNS signed sums of this rank's part of every parameter], "squares": its sum of squares}``
    of the module that trained, or None where a parameter's place in the whole tensor is unknown or memory ran out.
    FSDP1's flat parameters place each original parameter by their shard infos; FSDP2's DTensors by their
    global offset; any other parameter is whole on this rank."""
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # pragma: no cover - a torch without FSDP
        FullyShardedDataParallel = ()
    order, squares = [0.0] * PATTERNS, 0.0
    seen: set[int] = set()
    try:
        with torch.no_grad():
            for m in root.modules():
                flat = getattr(m, "_flat_param", None) if isinstance(m, FullyShardedDataParallel) else None
                if flat is None or id(flat) in seen:
                    continue
                seen.add(id(flat))
                seen.update(id(p) for p in (getattr(flat, "_params", None) or ()))
                local = getattr(flat, "_local_shard", None)
                local = flat.detach() if local is None else local
                for info, shape in zip(flat._shard_param_infos, flat._shapes):
                    if info.in_shard:
                        seg = local[info.offset_in_shard: info.offset_in_shard + info.numel_in_shard]
                        order = _add(order, order_sum(seg, int(info.intra_param_start_idx), rest_of(shape)))
                squares += _squares(local)
            for p in root.parameters():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                part = _dtensor_part(p) if hasattr(p, "to_local") else (p.detach(), 0)
                if part is None:
                    return None
                local, start = part
                if local.numel():
                    order = _add(order, order_sum(local, start, rest_of(p.shape)))
                    squares += _squares(local)
    except (torch.OutOfMemoryError, AttributeError, RuntimeError, TypeError, ValueError):
        return None
    return {"order": order, "squares": squares}
