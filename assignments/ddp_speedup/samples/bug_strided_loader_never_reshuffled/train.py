"""build-nanogpt style data loading (adapted in spirit from karpathy/build-nanogpt's ``DataLoaderLite``:
a position that starts at B * rank and advances by B * world; rewritten here for CIFAR images).
Bug: the data is put in one random order once and never reshuffled, so every epoch repeats it.
The split itself is right (disjoint strided batches, the whole set each epoch), as is everything else.
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


class DataLoaderLite:
    def __init__(self, x, y, B, rank, world):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))  # once
        self.x, self.y, self.B, self.rank, self.world = x[order], y[order], B, rank, world
        self.reset()

    def reset(self):
        self.pos = self.B * self.rank

    def steps(self):
        return len(self.x) // (self.B * self.world)

    def next_batch(self):
        xb, yb = self.x[self.pos:self.pos + self.B], self.y[self.pos:self.pos + self.B]
        self.pos += self.B * self.world
        if self.pos + self.B > len(self.x):
            self.reset()
        return xb, yb


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
    data = DataLoaderLite(x, y, 64, rank, world)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for epoch in range(args.epochs):
        for step in range(data.steps()):
            xb, yb = data.next_batch()
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
