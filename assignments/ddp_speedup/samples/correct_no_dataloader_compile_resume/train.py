"""Correct, nanoGPT-style: no DataLoader, accumulation without no_sync(), torch.compile, resume.

* no DataLoader at all: every epoch all ranks draw the same permutation (seeded by the
  epoch) and each takes a strided slice of it, batching by plain tensor indexing;
* gradient accumulation by toggling ``model.require_backward_grad_sync`` (what
  ``no_sync()`` does inside) instead of the context manager;
* ``torch.compile`` when it works here, eager otherwise (said once on rank 0);
* a snapshot in the working directory that a restarted job resumes from.
"""
import argparse
import os
import pickle
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SNAPSHOT = "snapshot.pt"


def load(data_dir):
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(data_dir, "cifar-10-batches-py", f"data_batch_{i}"), "rb") as f:
            d = pickle.load(f, encoding="latin1")
        xs.append(d["data"])
        ys += d["labels"]
    return torch.tensor(np.concatenate(xs), dtype=torch.float32).view(-1, 3, 32, 32) / 255, torch.tensor(ys)


def build():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(2048, 10))


def maybe_compile(model, master):
    if os.environ.get("NO_COMPILE"):
        return model
    try:
        compiled = torch.compile(model)
        return compiled
    except Exception as exc:  # no compiler in this sandbox: train eagerly
        if master:
            print(f"torch.compile unavailable ({type(exc).__name__}); running eagerly")
        return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--micro", type=int, default=2, help="micro-batches per optimizer step")
    p.add_argument("--batch", type=int, default=32, help="per micro-batch, per rank")
    args = p.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    master = rank == 0
    x, y = load(args.data_dir)

    net = nn.SyncBatchNorm.convert_sync_batchnorm(build())
    model = DDP(net)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    start_epoch = 0
    if os.path.exists(SNAPSHOT):
        snap = torch.load(SNAPSHOT, map_location="cpu")
        net.load_state_dict(snap["model"])
        opt.load_state_dict(snap["opt"])
        start_epoch = snap["epoch"] + 1
        if master:
            print(f"resuming after epoch {snap['epoch']}")
    fwd = maybe_compile(model, master)

    for epoch in range(start_epoch, args.epochs):
        t0 = time.time()
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        mine = order[rank::world]
        step_rows = args.batch * args.micro
        steps = len(mine) // step_rows
        for s in range(steps):
            rows = mine[s * step_rows:(s + 1) * step_rows]
            for m in range(args.micro):
                idx = rows[m * args.batch:(m + 1) * args.batch]
                model.require_backward_grad_sync = m == args.micro - 1
                loss = F.cross_entropy(fwd(x[idx]), y[idx]) / args.micro
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if master:
            print(f"epoch {epoch} loss {loss.item() * args.micro:.3f} ({time.time() - t0:.1f} s)")
            torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, SNAPSHOT)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
