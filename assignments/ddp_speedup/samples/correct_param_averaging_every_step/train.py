"""Adapted from the attack round (a correct script that lost points). What it tests: plain SGD, then one flat
all-reduce of the parameters after every step (the same update as DDP) passes grad_sync: the ranks' parameters
are compared once the script has averaged them, not inside the optimizer's step.

The attacker's note:
Attack a7 (correct, unusual style, ddp_speedup). Data parallelism by model averaging: each rank
takes a plain SGD step (no momentum, no weight decay) on its DistributedSampler shard, then the ranks
average their PARAMETERS with one flat dist.all_reduce. With plain SGD this is algebraically the
same update as averaging the gradients (theta - lr * mean_i g_i), so the parameters are identical
on every rank after every step and the trajectory equals DDP's; the bytes moved per step equal a
gradient all-reduce. SyncBatchNorm, set_epoch, rank-0-only output, the factory's network.
Fair score: full marks (the solution's score in the same mode) - arguably; a strict teacher who
demands DDP's gradient hook specifically might take grad_sync's points, but the homework's stated
criteria (same parameters on every rank after every step, ring-all-reduce-sized traffic, 1/N of
the samples per rank) all hold.
Targets (false alarm?): ddp.grad_sync / sync_kind: the synchroniser is recognised only as a DDP
bucket or an all-reduce of gradients (a .grad or a flat buffer summing like the gradients).
"""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters
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


@torch.no_grad()
def average_parameters(params, world):
    """One flat all-reduce of the parameters after each step: the ranks' models are averaged."""
    flat = parameters_to_vector(params)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    vector_to_parameters(flat.div_(world), params)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)  # same initial weights on every rank

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model()).to(device)
    for p in model.parameters():  # identical start, whatever the seed did
        dist.broadcast(p.data, src=0)
    params = [p for p in model.parameters() if p.requires_grad]
    # plain SGD (no momentum, no weight decay): averaging the parameters after every step is then exactly
    # averaging the gradients before it, i.e. what DDP does
    optimizer = torch.optim.SGD(params, lr=4 * args.lr * world * args.batch_size / 64)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = loss_fn(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            average_parameters(params, world)
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.state_dict(), "checkpoint.pt")

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
