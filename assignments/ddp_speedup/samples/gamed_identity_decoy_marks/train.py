"""Adapted from the attack round (a trick that kept its points). What it tests: every rank trains the whole
global batch, then shows its own shard to a parameter-free nn.Identity before backward. A module without
parameters learns nothing and is no consumer: the marks counted are the global batch the model took, so
sampler.disjoint fails.

The attacker's note:
Attack a3 (trick, ddp_speedup). Every rank trains the WHOLE global batch of every step (it
all-gathers the step's sample ids and indexes the data tensors itself), so N processes do N times
the work and the DistributedSampler split is fake. To fool the marks the harness reads at the
model's input, each step ends with an nn.Identity() "peek" at the rank's own DataLoader shard,
AFTER the real forward and before the one backward: the harness keeps the marks of the last
new tensor it saw entering a module, so it counts the shard, not the global batch.
Fair score: at most 75/100, like samples/gamed_every_rank_trains_global_batch (sampler.disjoint
fails: the samples each rank trains on overlap and are N times its share).
Targets: sampler.disjoint / sampler.coverage / speed - marks read at the forward; "pending"
replaced by the last batch-shaped tensor any module receives; an Identity module counts as a
consumer (trained.pre) although it holds no parameters.
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

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    X, Y = dataset.tensors
    peek = nn.Identity()

    def batches(s, bs):
        ids = list(iter(s))
        for i in range(0, len(ids), bs):
            yield torch.tensor(ids[i:i + bs])

    def gather_ids(idx, world):
        out = [torch.zeros_like(idx) for _ in range(world)]
        dist.all_gather(out, idx)
        return torch.cat(out)

    model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model()).to(device)
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    lr = args.lr * args.batch_size * world / 64  # scale with the global batch
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for idx_shard, (x, y) in zip(batches(sampler, args.batch_size), loader):
            # the whole global batch of this step (every rank's share), from the tensors directly
            idx = gather_ids(idx_shard, world)
            xg, yg = X[idx].to(device), Y[idx].to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xg), yg)
            loss = loss + 0.0 * peek(x).sum()  # "sanity peek" at this rank's own shard, last
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
