"""Sum the weights a saved checkpoint holds; run by ``graders.evidence.weights`` in a sandbox.

    python checkpoint_sums.py MODEL.pt

Standalone (no import of the grader): it runs in a sandbox with only this file and the checkpoint bound. The file
is loaded with ``torch.load(weights_only=True)`` (tensors and plain containers, no code) and walked, nested
dictionaries included (``{"model": ..., "optim": ...}``): for each floating-point tensor its dotted key, its shape
and the sum of its absolute values in float64. Prints one JSON line.
"""
import json
import os
import sys

import torch

MAX_KEYS = 4096
MAX_DEPTH = 6


def walk(obj, prefix, out, depth=0):
    """Every floating-point tensor under ``obj`` as ``out[key] = [shape, abs sum]``."""
    if depth > MAX_DEPTH or len(out) >= MAX_KEYS:
        return
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() and not obj.is_meta:
            local = obj.to_local() if hasattr(obj, "to_local") else obj
            out[prefix[:300]] = [list(obj.shape), float(local.detach().abs().sum(dtype=torch.float64))]
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
