"""Sum the weights a saved checkpoint holds; run by ``graders.evidence.weights`` in a sandbox.

    python checkpoint_sums.py MODEL.pt

Standalone (no import of the grader): it runs in a sandbox with only this file and the checkpoint bound. The file
is loaded with ``torch.load(weights_only=True)`` (tensors and plain containers, no code) and walked, nested
dictionaries included (``{"model": ..., "optim": ...}``): for each floating-point tensor its dotted key, its shape
the sum of its absolute values in float64, and its signed sum weighted by each element's position (``order_sum``, a
copy of the harness's ``distgrade_harness.order``: the harness sums every rank's shard of the trained module the
same way, so rows or columns put back in the wrong places show; ``tests/graders/test_order_sum.py`` holds the two
copies equal). Prints one JSON line.
"""
import json
import os
import sys

import torch

MAX_KEYS = 4096
MAX_DEPTH = 6
ROW_SALT, COL_SALT = 0x5BD1, 0x2C9F
PATTERNS = 4
_MASK = 2 ** 31 - 1


def signs(start, stop, salt, dtype=torch.float32):
    """``[stop - start, PATTERNS]`` of +-1 for the positions ``start .. stop-1`` (as ``distgrade_harness.order``)."""
    idx = torch.arange(start, stop, dtype=torch.int64)[:, None]
    h = (idx + salt + torch.arange(PATTERNS, dtype=torch.int64)[None, :] * 2 ** 24) & _MASK
    h = ((h ^ (h >> 15)) * 0x2C1B3C6D) & _MASK
    h = ((h ^ (h >> 12)) * 0x297A2D39) & _MASK
    h = h ^ (h >> 15)
    return (1 - 2 * ((h >> 17) & 1)).to(dtype)


def order_sum(tensor):
    """The whole tensor's ``PATTERNS`` signed sums, element ``[r, c]`` of it viewed as ``[rows, rest]`` weighted by
    ``signs(r, ROW_SALT) * signs(c, COL_SALT)``, pattern by pattern."""
    block = tensor.detach().reshape(tensor.shape[0] if tensor.dim() else 1, -1)
    if block.dtype not in (torch.float32, torch.float64):
        block = block.float()
    if not block.numel():
        return [0.0] * PATTERNS
    per_row = block @ signs(0, block.shape[1], COL_SALT, block.dtype)
    return [float(x) for x in (per_row.double() * signs(0, block.shape[0], ROW_SALT, torch.float64)).sum(dim=0)]


def walk(obj, prefix, out, depth=0):
    """Every floating-point tensor under ``obj`` as ``out[key] = [shape, abs sum, signed sum by position]``."""
    if depth > MAX_DEPTH or len(out) >= MAX_KEYS:
        return
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() and not obj.is_meta:
            local = obj.to_local() if hasattr(obj, "to_local") else obj
            out[prefix[:300]] = [list(obj.shape), float(local.detach().abs().sum(dtype=torch.float64)),
                                 order_sum(local)]
        return
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for k, v in items:
        walk(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)


def main():
    torch.set_num_threads(1)
    try:
        state = torch.load(sys.argv[1], map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - an unreadable file is a verdict, not a crash
        print(json.dumps({"error": f"unreadable: {type(exc).__name__}"}))
        return
    out = {}
    walk(state, "", out)
    print(json.dumps({"tensors": out}))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # the answer is printed: tearing torch's modules down would cost about a second of CPU
