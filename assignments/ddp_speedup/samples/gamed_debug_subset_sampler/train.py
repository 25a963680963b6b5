"""Gamed (or a debug line left in): the DDP checklist done right on a 10% subset of the training data,
Subset(dataset, range(len // 10)) behind a DistributedSampler with set_epoch. The DataLoader covers its
view exactly; at the model the runs of distinct samples were too short to count as epochs, so coverage and
reshuffle were not judged and their points moved to the disjoint check. Coverage is judged on how much of
the data ever reached the model."""
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
    rank = dist.get_rank()
    torch.manual_seed(0)
    x, y = load(args.data_dir)
    dataset = torch.utils.data.Subset(TensorDataset(x, y), range(len(x) // 10))  # debug: a tenth of the data
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs * 4):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
