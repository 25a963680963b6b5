"""Correct in an unusual style: no DataLoader, each rank draws random batches (with replacement) only
from its own half of the data (a fixed split by rank). The ranks never train on the same sample, so
the data is split; there are no epochs, so coverage and reshuffle cannot be judged and cost nothing.
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir")
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x, y = load(args.data_dir)
    mine = torch.arange(rank, len(x), world)  # this rank's shard, fixed
    gen = torch.Generator().manual_seed(100 + rank)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))))
    opt = torch.optim.SGD(model.parameters(), lr=0.04, momentum=0.9)
    for epoch in range(args.epochs):
        for it in range(len(mine) // 64):
            ix = mine[torch.randint(len(mine), (64,), generator=gen)]
            loss = F.cross_entropy(model(x[ix]), y[ix])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
