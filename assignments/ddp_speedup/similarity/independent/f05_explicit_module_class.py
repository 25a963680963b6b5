"""CIFAR-10 on several processes: explicit nn.Module, train() and validate() as functions."""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, random_split


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(64 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = self.dropout(torch.flatten(x, 1))
        return self.fc2(F.relu(self.fc1(x)))


def get_data(path):
    batches = [pickle.load(open(os.path.join(path, "cifar-10-batches-py", "data_batch_" + str(i)), "rb"),
                           encoding="bytes") for i in range(1, 6)]
    images = np.concatenate([b[b"data"] for b in batches]).reshape(-1, 3, 32, 32)
    labels = sum((list(b[b"labels"]) for b in batches), [])
    return TensorDataset(torch.FloatTensor(images / 255.0), torch.LongTensor(labels))


def train(model, loader, optimizer, epoch, rank):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        if rank == 0 and batch_idx % 200 == 0:
            print("Train Epoch: {} [{}/{}]\tLoss: {:.6f}".format(epoch, batch_idx, len(loader), loss.item()))


def validate(model, loader):
    model.eval()
    correct = torch.tensor(0)
    total = torch.tensor(0)
    with torch.no_grad():
        for data, target in loader:
            correct += model(data).argmax(dim=1).eq(target).sum()
            total += target.numel()
    dist.all_reduce(correct)
    dist.all_reduce(total)
    return correct.item() / total.item()


def main():
    parser = argparse.ArgumentParser(description="CIFAR-10 DDP")
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    torch.manual_seed(1)
    train_set, val_set = random_split(get_data(args.data_dir), [48000, 2000])
    train_sampler = DistributedSampler(train_set)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    val_loader = DataLoader(val_set, batch_size=1000, sampler=DistributedSampler(val_set, shuffle=False))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(ConvNet()))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(1, args.epochs + 1):
        train_sampler.set_epoch(epoch)
        train(model, train_loader, optimizer, epoch, rank)
        acc = validate(model, val_loader)
        if rank == 0:
            print(f"epoch {epoch}: validation accuracy {acc:.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
