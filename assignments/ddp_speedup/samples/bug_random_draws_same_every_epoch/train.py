"""Bug: random batches drawn with replacement, each rank from its own fixed shard (no DataLoader), but
the generator is re-seeded at the start of every epoch, so every epoch trains the same batches in the
same order: the random-draw version of a missing set_epoch. Random draws used to skip the reshuffle
check (points moved to disjoint); a batch that comes back in the same place is now seen at the model."""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def load(data_dir):
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(data_dir, "cifar-10-batches-py", f"data_batch_{i}"), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        xs.append(d[b"data"])
        ys += d[b"labels"]
    return torch.from_numpy(np.concatenate(xs)).float().div_(255).view(-1, 3, 32, 32), torch.tensor(ys)


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


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
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    opt = torch.optim.SGD(model.parameters(), lr=0.04, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        gen = torch.Generator().manual_seed(100 + rank)  # the bug: the same draws every epoch
        for _ in range(len(mine) // 64):
            ix = mine[torch.randint(len(mine), (64,), generator=gen)]
            loss = loss_fn(model(x[ix]), y[ix])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
