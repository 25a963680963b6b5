"""CIFAR-10 with DDP, organised like the ImageNet example of pytorch/examples (meters, top-k accuracy,
best-checkpoint copy), which is where the helpers below come from."""
import argparse
import os
import pickle
import shutil
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self, name, fmt=":f"):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "model_best.pth.tar")


def cifar_tensors(root, train=True):
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    xs, ys = [], []
    for n in names:
        with open(os.path.join(root, "cifar-10-batches-py", n), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        xs.append(d[b"data"])
        ys += d[b"labels"]
    x = torch.from_numpy(np.vstack(xs)).view(-1, 3, 32, 32).float() / 255
    return TensorDataset((x - 0.5) / 0.5, torch.tensor(ys))


def build_model():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def train(loader, model, criterion, optimizer, epoch, device, rank):
    losses, top1 = AverageMeter("Loss", ":.4e"), AverageMeter("Acc@1", ":6.2f")
    model.train()
    end = time.time()
    for images, target in loader:
        images, target = images.to(device), target.to(device)
        output = model(images)
        loss = criterion(output, target)
        acc1, = accuracy(output, target, topk=(1,))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0].item(), images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(f"Epoch [{epoch}] {losses} {top1} ({time.time() - end:.1f}s)")


def validate(loader, model, device):
    model.eval()
    totals = torch.zeros(2, device=device)
    with torch.no_grad():
        for images, target in loader:
            images, target = images.to(device), target.to(device)
            acc1, = accuracy(model(images), target)
            totals += torch.tensor([acc1.item() * target.size(0), target.size(0)], device=device)
    dist.all_reduce(totals)
    return (totals[0] / totals[1]).item()


def main():
    parser = argparse.ArgumentParser(description="CIFAR-10 DDP")
    parser.add_argument("--data", default="./data")
    parser.add_argument("--epochs", default=5, type=int)
    parser.add_argument("-b", "--batch-size", default=64, type=int)
    parser.add_argument("--lr", "--learning-rate", default=0.02, type=float)
    args = parser.parse_args()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if torch.cuda.is_available() else torch.device("cpu")
    train_dataset, val_dataset = cifar_tensors(args.data), cifar_tensors(args.data, train=False)
    train_sampler = DistributedSampler(train_dataset)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
    val_loader = DataLoader(val_dataset, batch_size=200, sampler=DistributedSampler(val_dataset, shuffle=False))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(build_model()).to(device),
                device_ids=[device.index] if device.type == "cuda" else None)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr * world_size * args.batch_size / 64, momentum=0.9,
                                weight_decay=1e-4)
    best_acc1 = 0.0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        train(train_loader, model, criterion, optimizer, epoch, device, rank)
        acc1 = validate(val_loader, model, device)
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        if rank == 0:
            save_checkpoint({"epoch": epoch + 1, "state_dict": model.module.state_dict(), "best_acc1": best_acc1,
                             "optimizer": optimizer.state_dict()}, is_best)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
