"""Hostile sample: forge a perfect stream through the stream's private ``_send``.

Like ``hostile_forge_stream_closure`` (the observer found in ``__closure__`` cells of the patched
``torch.autograd.backward``, names built at run time), but it calls ``stream._send``, which skips the
caller check of ``send``: the records go out on the rank's own authenticated connection, counted and
MAC-sealed by the harness itself. Trains nothing.
"""
import os
import time

import torch

def perfect_records(rank, world, t0):
    """The records a perfect 2-epoch run would send (disjoint, covering, reshuffled shards)."""
    import random
    n, bs, done, out = 4096, 64, 0, []
    out.append({"type": "ddp", "batchnorm": 0, "syncbatchnorm": 1, "parameters": 1000, "device": "cpu"})
    out.append({"type": "optimizer", "class": "SGD", "lr": [0.1]})
    for epoch in range(2):
        order = list(range(n))
        random.Random(epoch).shuffle(order)
        mine = order[rank::world]
        rows = len(mine) // bs
        out.append({"type": "epoch", "loader": 1, "epoch": epoch, "kind": "map", "complete": True,
                    "batches": rows, "batch_size": bs, "indices": mine, "dataset": "CIFAR10",
                    "num_workers": 0, "drop_last": False, "sampler": "DistributedSampler",
                    "persistent_workers": False, "dataset_len": n})
        out.append({"type": "steps", "t": [t0 + 0.01 * (done + i) for i in range(rows)],
                    "samples": [bs * (done + i + 1) for i in range(rows)], "loss": [2.0] * rows,
                    "backwards": [1] * rows, "buckets": [1] * rows, "synced": [1] * rows,
                    "bucket_bytes": [4000] * rows})
        done += rows
    out.append({"type": "prints", "count": 0, "logging": 0, "tail": []})
    out.append({"type": "finished", "steps": done, "digest": "ab" * 32, "param_sums": [1.0],
                "param_tensors": 1, "model_source": "ddp"})
    return out


rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
cells = getattr(torch.autograd.backward, "__clo" + "sure__") or ()
obs = next((getattr(c, "cell_" + "contents") for c in cells
            if hasattr(getattr(c, "cell_" + "contents"), "stream")), None)
if obs is not None:
    push = getattr(obs.stream, "_se" + "nd")
    for rec in perfect_records(rank, world, time.monotonic()):
        push(rec)
    obs.step_count = sum(len(r["t"]) for r in perfect_records(rank, world, 0.0) if r["type"] == "steps")
    time.sleep(1.0)
