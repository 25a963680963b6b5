import argparse
import os
import pickle

import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler
from torch.utils.data import DataLoader, TensorDataset


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

def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += float(loss)
    return total / len(loader)


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    hits = torch.zeros(2)
    for x, y in loader:
        hits[0] += (model(x).argmax(1) == y).sum()
        hits[1] += len(y)
    dist.all_reduce(hits)
    return (hits[0] / hits[1]).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    full = load_cifar(args.data_dir)
    train_part, test_part = torch.utils.data.random_split(full, [45000, 5000], generator=torch.Generator().manual_seed(0))
    train_sampler = DistributedSampler(train_part)
    train_loader = DataLoader(train_part, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test_part, batch_size=500, sampler=DistributedSampler(test_part, shuffle=False))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        loss = train_epoch(model, train_loader, optimizer, nn.CrossEntropyLoss())
        acc = accuracy(model, test_loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss:.4f} test acc {acc:.2%}")
            torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
