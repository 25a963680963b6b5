"""nanoGPT-style batches (adapted in spirit from karpathy/nanoGPT's ``get_batch``: random offsets drawn
each step, no DataLoader; rewritten here for CIFAR). Bug: every rank draws from the whole data set with
its own seed, so the ranks train on overlapping samples in the same step. Everything else is right.
"""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def load(data_dir):
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(data_dir, "cifar-10-batches-py", f"data_batch_{i}"), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        xs.append(d[b"data"])
        ys += d[b"labels"]
    return torch.from_numpy(np.concatenate(xs)).float().div_(255).view(-1, 3, 32, 32), torch.tensor(ys)


def get_batch(x, y, batch_size, gen):
    ix = torch.randint(len(x), (batch_size,), generator=gen)
    return x[ix], y[ix]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1337)
    x, y = load(args.data_dir)
    gen = torch.Generator().manual_seed(1337 + rank)  # nanoGPT's seed_offset = rank
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))))
    opt = torch.optim.SGD(model.parameters(), lr=0.02 * world, momentum=0.9)
    iters = len(x) // (args.batch_size * world)  # one epoch's worth of steps
    for epoch in range(args.epochs):
        for it in range(iters):
            xb, yb = get_batch(x, y, args.batch_size, gen)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
            torch.save(model.module.state_dict(), "ckpt.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
