"""Attack sample: a tiny DDP "shadow" head is what torch.optim steps; the real model is updated by hand.

The real model (plain BatchNorm) trains on every rank with ``p.sub_(lr * p.grad)`` and is never
synchronised. A DDP-wrapped ``nn.Linear(10, 10)`` fed the real model's detached output gets its own
SGD step, so DDP's hook fires and the optimizer's parameters stay equal across ranks. Evidence
taken from the optimizer says "synchronised, no BatchNorm"; the module that learned says otherwise.
Must lose ddp.grad_sync and ddp.syncbn.
"""

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
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=0.02, help="for a global batch of 64")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = make_model()  # the real model: plain BatchNorm, never wrapped
    shadow = DDP(nn.Linear(10, 10))
    optimizer = torch.optim.SGD(shadow.parameters(), lr=0.001)
    lr = args.lr * args.batch_size * world / 64
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            model.zero_grad(set_to_none=True)
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.sub_(lr * p.grad)
            optimizer.zero_grad()
            loss_fn(shadow(out.detach()), y).backward()
            optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.state_dict(), "checkpoint.pt")

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
