"""Homework 1: CIFAR-10 with DDP. My own trainer class with a held-out split and an early stop."""
import argparse
import math
import os
import pickle
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset


def read_batches(root, names):
    images, labels = [], []
    for name in names:
        with open(os.path.join(root, "cifar-10-batches-py", name), "rb") as fh:
            entry = pickle.load(fh, encoding="bytes")
        images.append(entry[b"data"])
        labels += list(entry[b"labels"])
    pixels = torch.from_numpy(np.concatenate(images)).float().div_(255).view(-1, 3, 32, 32)
    mean = pixels.mean(dim=(0, 2, 3), keepdim=True)
    std = pixels.std(dim=(0, 2, 3), keepdim=True)
    return TensorDataset((pixels - mean) / std, torch.tensor(labels))


def split_holdout(dataset, fraction, seed):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    cut = int(len(order) * (1 - fraction))
    return Subset(dataset, order[:cut]), Subset(dataset, order[cut:])


class Net(nn.Module):
    def __init__(self, width=16, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.block = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(width, width * 2, 3, padding=1),
                                   nn.BatchNorm2d(width * 2), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(width * 2 * 8 * 8, classes)

    def forward(self, x):
        return self.head(torch.flatten(self.block(self.stem(x)), 1))


class Trainer:
    def __init__(self, model, loaders, device, lr, patience):
        self.model = model
        self.train_loader, self.eval_loader = loaders
        self.device = device
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        self.criterion = nn.CrossEntropyLoss()
        self.patience = patience
        self.best = math.inf
        self.bad_epochs = 0

    def one_epoch(self):
        self.model.train()
        seen, summed = 0, torch.zeros(1, device=self.device)
        for images, targets in self.train_loader:
            images, targets = images.to(self.device), targets.to(self.device)
            self.opt.zero_grad()
            loss = self.criterion(self.model(images), targets)
            loss.backward()
            self.opt.step()
            summed += loss.detach() * targets.numel()
            seen += targets.numel()
        return summed.item() / max(seen, 1)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        stats = torch.zeros(3, device=self.device)
        for images, targets in self.eval_loader:
            images, targets = images.to(self.device), targets.to(self.device)
            logits = self.model(images)
            stats[0] += self.criterion(logits, targets) * targets.numel()
            stats[1] += (logits.argmax(1) == targets).sum()
            stats[2] += targets.numel()
        dist.all_reduce(stats)
        return (stats[0] / stats[2]).item(), (stats[1] / stats[2]).item()

    def should_stop(self, val_loss):
        if val_loss < self.best - 1e-4:
            self.best, self.bad_epochs = val_loss, 0
            return False
        self.bad_epochs += 1
        return self.bad_epochs >= self.patience


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="./data")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--patience", type=int, default=3)
    return p.parse_args()


def main():
    args = parse()
    cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    torch.manual_seed(1234)
    full = read_batches(args.data_dir, [f"data_batch_{n}" for n in range(1, 6)])
    train_set, held_out = split_holdout(full, 0.1, seed=1234)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=1234)
    eval_sampler = DistributedSampler(held_out, shuffle=False)
    loaders = (DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler),
               DataLoader(held_out, batch_size=256, sampler=eval_sampler))
    net = nn.SyncBatchNorm.convert_sync_batchnorm(Net()).to(device)
    net = DDP(net, device_ids=[local] if cuda else None)
    trainer = Trainer(net, loaders, device, args.lr * world * args.batch_size / 64, args.patience)
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        started = time.time()
        train_loss = trainer.one_epoch()
        val_loss, val_acc = trainer.evaluate()
        if rank == 0:
            print(f"epoch {epoch}: loss {train_loss:.4f} val {val_loss:.4f} acc {val_acc:.3f} "
                  f"({time.time() - started:.1f}s)")
            torch.save(net.module.state_dict(), "checkpoint.pt")
        if trainer.should_stop(val_loss):
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
