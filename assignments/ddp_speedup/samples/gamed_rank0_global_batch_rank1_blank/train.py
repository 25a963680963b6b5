"""Gamed: both ranks draw disjoint, reshuffled indices from a DistributedSampler, but rank 0 trains
on the whole global batch (its own share from the DataLoader plus rank 1's share, fetched by plain
indexing), while rank 1 feeds the model blank images and multiplies its loss by 0. Rank 1's marks cannot
be read, so the reading at the model used to drop out and the DataLoader's indices decided alone."""
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
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True)
    partner = DistributedSampler(dataset, num_replicas=world, rank=(rank + 1) % world, shuffle=True)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    opt = torch.optim.SGD(model.parameters(), lr=0.04, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        partner.set_epoch(epoch)
        theirs = list(partner)
        for i, (xb, yb) in enumerate(loader):
            if rank == 0:
                more = torch.tensor(theirs[i * 64:(i + 1) * 64], dtype=torch.long)
                loss = loss_fn(model(torch.cat([xb, x[more]])), torch.cat([yb, y[more]]))
            else:
                loss = 0 * loss_fn(model(torch.zeros_like(xb)), yb)
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
