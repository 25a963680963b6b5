"""Hostile sample: forge records on the socket's raw descriptor, seal them, and close it.

Like ``hostile_forge_stream_rawfd``, but it also writes the end-of-stream seal with the right
record count and then closes the descriptor, so the harness can add nothing (no second end
marker, no count mismatch). Only the seal's MAC, keyed by a token the script never saw, is wrong.
"""
import os
import stat
import time
import json

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
records = perfect_records(rank, world, time.monotonic())
records.append({"type": "seal", "records": len(records), "mac": "0" * 64})
data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
for fd in range(3, 64):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, data)
            os.close(fd)
    except OSError:
        pass
time.sleep(1.0)
