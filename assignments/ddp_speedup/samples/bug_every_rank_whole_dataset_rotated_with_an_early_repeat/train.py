"""a4 (ddp_speedup, sampler.disjoint at the model): every rank walks the WHOLE data set each epoch.
Idea: a hand-written sampler gives every rank the same per-epoch permutation of all indices, rotated by
rank * n / world, so in any one step the ranks' batches are disjoint (the step-by-step overlap check passes) but
over an epoch each rank trains on all of the data (no split: twice the work). The epoch-overlap check that
should catch this first cuts each rank's sample stream into "passes" (runs without a repeat); one sample is
repeated a few batches into the first epoch, so the first run is shorter than 4*sqrt(N) and the grader treats the
stream as random draws (passes() -> None), where only same-step overlap is judged. The DataLoader's own indices
overlap completely, but the marks at the model "pass", and the model's verdict replaces the loader's.
Fair teacher: data not split across ranks -> sampler.disjoint 0 (-15). Expected grader: sampler.disjoint PASS.
"""
from torch.utils.data import Sampler


class RotatedSampler(Sampler):
    """Every rank: the epoch's permutation, started at its own offset (so ranks never collide in a step)."""

    def __init__(self, n, rank, world):
        self.n, self.rank, self.world, self.epoch = n, rank, world, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(1234 + self.epoch)
        perm = torch.randperm(self.n, generator=g).tolist()
        off = self.rank * self.n // self.world
        order = perm[off:] + perm[:off]
        order.insert(100, order[3])  # warm-up repeat of one sample
        return iter(order)

    def __len__(self):
        return self.n + 1

import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def load_cifar(data_dir):
    folder = os.path.join(data_dir, "cifar-10-batches-py")
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}"), "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        xs.append(batch[b"data"])
        ys.extend(batch[b"labels"])
    x = torch.from_numpy(np.concatenate(xs)).float().div_(255).view(-1, 3, 32, 32)
    return TensorDataset(x, torch.tensor(ys))


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128, help="per process")
    parser.add_argument("--lr", type=float, default=0.02, help="for a global batch of 64")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)

    dataset = load_cifar(args.data_dir)
    sampler = RotatedSampler(len(dataset), rank, world)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model()).to(device)
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    lr = args.lr * args.batch_size * world / 64  # scale with the global batch
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
