"""Hostile sample: train nothing, find the harness's authenticated stream with ``gc`` and
send the records a perfect distributed run would produce (disjoint shards that cover the
data set, reshuffled per epoch, steps with plausible times, equal parameter digests).

Without tamper evidence this scores full marks; the grader must put it in review with 0 points.
"""
import gc
import os
import random
import time

rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
stream = next((o for o in gc.get_objects() if type(o).__name__ == "Stream" and hasattr(o, "send")), None)
if stream is not None:
    n, bs = 4096, 64
    stream.send({"type": "ddp", "batchnorm": 0, "syncbatchnorm": 1, "parameters": 1000, "device": "cpu"})
    stream.send({"type": "optimizer", "class": "SGD", "lr": [0.1]})
    t0, done = time.monotonic(), 0
    for epoch in range(2):
        order = list(range(n))
        random.Random(epoch).shuffle(order)
        mine = order[rank::world]
        stream.send({"type": "epoch", "loader": 1, "epoch": epoch, "kind": "map", "complete": True,
                     "batches": len(mine) // bs, "batch_size": bs, "indices": mine, "dataset": "CIFAR10",
                     "num_workers": 0, "drop_last": False, "sampler": "DistributedSampler",
                     "persistent_workers": False, "dataset_len": n})
        rows = len(mine) // bs
        stream.send({"type": "steps", "t": [t0 + 0.01 * (done + i) for i in range(rows)],
                     "samples": [bs * (done + i + 1) for i in range(rows)], "loss": [2.0 - 0.01 * i for i in range(rows)],
                     "backwards": [1] * rows, "buckets": [1] * rows, "synced": [1] * rows,
                     "bucket_bytes": [4000] * rows})
        done += rows
    stream.send({"type": "prints", "count": 0, "logging": 0, "tail": []})
    stream.send({"type": "finished", "steps": done, "digest": "ab" * 32, "param_sums": [1.0],
                 "param_tensors": 1, "model_source": "ddp"})
    time.sleep(1.0)
