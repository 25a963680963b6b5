"""Correct: no DDP; the gradients go out as one flattened buffer, all-reduced with
``async_op=True`` and waited for just before the optimizer step (overlap done by hand).
The rest follows the classic "writing distributed applications" tutorial:

* each rank builds its own ``Partition`` of the data set (a shuffled index list cut
  into WORLD_SIZE parts): the local indices are 0..n-1 on every rank, the data is disjoint;
* no DistributedDataParallel: gradients are averaged by hand with ``all_reduce``;
* the DataLoader's own ``shuffle=True`` reorders the partition every epoch;
* ``if local_rank == 0`` guards, and ``builtins.print`` silenced on the other ranks;
* a test loader evaluated every epoch (no sampler, no set_epoch).
"""
import argparse
import builtins
import os
import pickle
import random

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Partition:
    """A view of ``data`` through a list of indices."""

    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        return self.data[self.index[i]]


class DataPartitioner:
    def __init__(self, data, sizes, seed=1234):
        self.data = data
        order = list(range(len(data)))
        random.Random(seed).shuffle(order)
        self.partitions, start = [], 0
        for frac in sizes:
            n = int(frac * len(order))
            self.partitions.append(order[start:start + n])
            start += n

    def use(self, part):
        return Partition(self.data, self.partitions[part])


def read_split(data_dir, names):
    xs, ys = [], []
    for name in names:
        with open(os.path.join(data_dir, "cifar-10-batches-py", name), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        xs.append(d[b"data"])
        ys.extend(d[b"labels"])
    x = torch.from_numpy(np.concatenate(xs)).float().div_(255).view(-1, 3, 32, 32)
    return TensorDataset(x, torch.tensor(ys))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def average_gradients(model):
    """One flattened buffer, reduced asynchronously while the loss is logged, then copied back."""
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    work = dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True)
    return work, flat, grads


def finish_average(pending):
    work, flat, grads = pending
    work.wait()
    flat.div_(dist.get_world_size())
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    if local_rank != 0:
        builtins.print = lambda *a, **k: None  # quiet workers

    torch.manual_seed(1234)
    train = read_split(args.data_dir, [f"data_batch_{i}" for i in range(1, 6)])
    test = read_split(args.data_dir, ["test_batch"])
    part = DataPartitioner(train, [1.0 / world] * world).use(rank)
    bsz = 128 // world
    train_loader = DataLoader(part, batch_size=bsz, shuffle=True)
    test_loader = DataLoader(test, batch_size=256)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    for epoch in range(args.epochs):
        model.train()
        epoch_loss = 0.0
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            pending = average_gradients(model)
            epoch_loss += loss.item()  # overlaps the all-reduce
            finish_average(pending)
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                correct += (model(data).argmax(1) == target).sum().item()
        print(f"rank {rank} epoch {epoch}: loss {epoch_loss / len(train_loader):.3f}, "
              f"test accuracy {correct / len(test):.3f}")
        if local_rank == 0:
            torch.save(model.state_dict(), "model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
