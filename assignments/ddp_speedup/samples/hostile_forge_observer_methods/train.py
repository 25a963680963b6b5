"""Hostile sample: forge a run through the observer's own methods, never touching the stream.

The observer (found in ``__closure__`` cells of the patched ``torch.autograd.backward``, names built
at run time) sends records from harness code, so ``stream.send``'s caller check passes: the script
hands ``_close_epoch`` made-up epochs and ``_on_step`` a made-up optimizer, step after step.
Trains nothing (no backward, no real optimizer step).
"""
import os
import random
import time
import types

import torch

rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
cells = getattr(torch.autograd.backward, "__clo" + "sure__") or ()
obs = next((getattr(c, "cell_" + "contents") for c in cells
            if hasattr(getattr(c, "cell_" + "contents"), "stream")), None)
if obs is not None:
    n, bs = 4096, 64
    param = torch.nn.Parameter(torch.zeros(10))
    opt = types.SimpleNamespace(param_groups=[{"params": [param], "lr": 0.1}])
    close, step = getattr(obs, "_close_" + "epoch"), getattr(obs, "_on_" + "step")
    for epoch in range(2):
        order = list(range(n))
        random.Random(epoch).shuffle(order)
        mine = order[rank::world]
        batches = [mine[i:i + bs] for i in range(0, len(mine), bs)]
        fake = types.SimpleNamespace(key=1, number=epoch, batches=batches, yielded=len(batches), closed=False,
                                     kind="map", index_map=None,
                                     meta={"dataset": "CIFAR10", "num_workers": 0, "drop_last": False,
                                           "sampler": "DistributedSampler", "persistent_workers": False,
                                           "dataset_len": n})
        for b in batches:
            obs.consumed[1] = obs.consumed.get(1, 0) + len(b)
            obs.last_key, obs.backwards, obs.synced, obs.buckets, obs.last_loss = 1, 1, 1, 1, 2.0
            step(opt, (), {})
            time.sleep(0.002)
        close(fake, True)
