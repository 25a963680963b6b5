"""Adapted from the attack round (a correct script that lost points). What it tests: gradients taken with
torch.autograd.grad instead of backward(), averaged by hand, still count as training: the marks read at the
forward are counted, so the data checks see the samples.

The attacker's note:
Attack a4 (correct, unusual style, ddp_speedup). A correct data-parallel script written
"functionally": no DDP wrapper; gradients come from torch.autograd.grad(loss, params) (not
loss.backward()), are averaged across ranks with one dist.all_reduce per gradient, assigned to
p.grad and stepped by torch.optim.SGD. DistributedSampler + set_epoch, SyncBatchNorm, rank-0-only
print and checkpoint, the factory's network. Mathematically identical to DDP.
Fair score: full marks (what the reference solution gets in the same mode).
Targets (false alarm?): the harness counts a backward in torch.autograd.backward; autograd.grad is
hooked only to name the trained module, it does not count the marks read at the forward
(_count_read) nor the backward count - do the data checks then see no samples?
"""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
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


def average_gradients(params, grads, world):
    """All-reduce each gradient (sum), divide by the world size, hand it to the parameter."""
    for p, g in zip(params, grads):
        dist.all_reduce(g, op=dist.ReduceOp.SUM)
        g.div_(world)
        p.grad = g


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
    optimizer = torch.optim.SGD(params, lr=args.lr * world * args.batch_size / 64, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = loss_fn(model(x), y)
            grads = torch.autograd.grad(loss, params)
            average_gradients(params, grads, world)
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
