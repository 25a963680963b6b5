"""Homework 1, distributed CIFAR-10: a residual net trained with a cosine schedule and label smoothing."""
import argparse
import math
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset


def load_training_images(base):
    chunks, classes = [], []
    for part in range(1, 6):
        path = os.path.join(base, "cifar-10-batches-py", "data_batch_%d" % part)
        with open(path, "rb") as handle:
            record = pickle.load(handle, encoding="bytes")
        chunks.append(torch.as_tensor(record[b"data"]))
        classes.append(torch.as_tensor(record[b"labels"]))
    images = torch.cat(chunks).reshape(-1, 3, 32, 32).float().mul_(1 / 255.0)
    return TensorDataset(images.sub_(0.5).div_(0.25), torch.cat(classes))


def split_holdout(dataset, fraction, seed):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(dataset))
    keep = len(idx) - int(len(idx) * fraction)
    return Subset(dataset, idx[:keep].tolist()), Subset(dataset, idx[keep:].tolist())


class Residual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(out)))


class Net(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.entry = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.body = nn.Sequential(Residual(width), nn.MaxPool2d(2), Residual(width), nn.MaxPool2d(2))
        self.out = nn.Linear(width, 10)

    def forward(self, x):
        return self.out(self.body(self.entry(x)).mean(dim=(2, 3)))


def cosine_lr(step, total, peak, warm=100):
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return 0.5 * peak * (1 + math.cos(math.pi * progress))


def train_epoch(net, loaders, optimizer, device, step, total_steps, peak):
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    net.train()
    running = torch.zeros(2, device=device)
    for xb, yb in loaders[0]:
        for group in optimizer.param_groups:
            group["lr"] = cosine_lr(step, total_steps, peak)
        xb, yb = xb.to(device), yb.to(device)
        out = net(xb)
        loss = loss_fn(out, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        running += torch.stack([loss.detach() * len(yb), torch.tensor(float(len(yb)), device=device)])
        step += 1
    dist.all_reduce(running)
    return step, (running[0] / running[1]).item()


@torch.no_grad()
def accuracy(net, loader, device):
    net.eval()
    hits = torch.zeros(2, device=device)
    for xb, yb in loader:
        pred = net(xb.to(device)).argmax(-1)
        hits += torch.tensor([(pred == yb.to(device)).sum().item(), len(yb)], device=device, dtype=torch.float)
    dist.all_reduce(hits)
    return (hits[0] / hits[1]).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    torch.manual_seed(1234)
    full = load_training_images(args.data_dir)
    train_set, held_out = split_holdout(full, 0.1, seed=1234)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=1234)
    eval_sampler = DistributedSampler(held_out, shuffle=False)
    loaders = (DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler),
               DataLoader(held_out, batch_size=256, sampler=eval_sampler))
    net = nn.SyncBatchNorm.convert_sync_batchnorm(Net()).to(device)
    net = DDP(net, device_ids=[local] if cuda else None)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    total_steps = args.epochs * len(loaders[0])
    step = 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        step, loss = train_epoch(net, loaders, optimizer, device, step, total_steps, args.lr * world)
        acc = accuracy(net, loaders[1], device)
        if rank == 0:
            print(f"epoch {epoch} loss={loss:.4f} holdout_acc={acc:.3f}")
            torch.save(net.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
