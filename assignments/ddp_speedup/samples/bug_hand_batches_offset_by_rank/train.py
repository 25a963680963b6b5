"""a4 (ddp_speedup, data split / honest bug): the reference DDP script with the DistributedSampler replaced by
hand-made batches from one shared per-epoch permutation, where rank r takes batch (k + rank) % n_batches at
step k (the student meant k*world + rank). Every rank walks through the WHOLE data set every epoch (no split:
each rank does all the work, 2x the compute, zero speedup), just staggered by one batch, so in any single step
the two ranks' batches are disjoint. A fair teacher fails sampler.disjoint (0/15) and would see no speedup:
~75/90. Expected grader: 90/90 (disjointness is judged step by step at the model; no DataLoader, so no
per-epoch index check).
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

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)

    x_all, y_all = load_cifar(args.data_dir).tensors
    n, bs = len(x_all), args.batch_size
    n_batches = n // bs

    model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model()).to(device)
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    lr = args.lr * args.batch_size * world / 64  # scale with the global batch
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(epoch))  # same on every rank
        model.train()
        total, count = 0.0, 0
        for k in range(n_batches):
            b = (k + rank) % n_batches  # (bug) meant (k * world + rank): every rank still walks every batch
            idx = perm[b * bs:(b + 1) * bs]
            x, y = x_all[idx], y_all[idx]
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
