"""Correct, torchvision-reference style.

* ``setup_for_distributed``: ``builtins.print`` replaced by a wrapper that prints on the
  master only (or with ``force=True``);
* ``next(iter(loader))`` peeks at one batch (for the input shape) before ``set_epoch``;
* 16 DataLoader workers, started with fork, not persistent;
* an evaluation loader with its own DistributedSampler(shuffle=False) and no set_epoch.
"""
import argparse
import builtins
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def setup_for_distributed(is_master):
    builtin_print = builtins.print

    def print(*args, **kwargs):
        force = kwargs.pop("force", False)
        if is_master or force:
            builtin_print(*args, **kwargs)

    builtins.print = print


class CifarBatches(Dataset):
    def __init__(self, root, names):
        arrays, self.targets = [], []
        for name in names:
            with open(os.path.join(root, "cifar-10-batches-py", name), "rb") as fh:
                entry = pickle.load(fh, encoding="bytes")
            arrays.append(entry[b"data"])
            self.targets += list(entry[b"labels"])
        self.images = np.vstack(arrays).reshape(-1, 3, 32, 32)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return torch.as_tensor(self.images[i], dtype=torch.float32) / 255.0, self.targets[i]


def main():
    parser = argparse.ArgumentParser(description="classification training")
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--epochs", default=4, type=int)
    parser.add_argument("--workers", default=16, type=int)
    parser.add_argument("-b", "--batch-size", default=64, type=int)
    args = parser.parse_args()

    rank, world, gpu = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="gloo", init_method="env://", world_size=world, rank=rank)
    setup_for_distributed(rank == 0)

    train_set = CifarBatches(args.data_dir, [f"data_batch_{k}" for k in range(1, 6)])
    val_set = CifarBatches(args.data_dir, ["test_batch"])
    train_sampler = DistributedSampler(train_set)
    val_sampler = DistributedSampler(val_set, shuffle=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler,
                              num_workers=args.workers, multiprocessing_context="fork")
    val_loader = DataLoader(val_set, batch_size=128, sampler=val_sampler, num_workers=2)

    sample, _ = next(iter(train_loader))  # shape of one batch, before any set_epoch
    print("input batch", tuple(sample.shape))

    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = DistributedDataParallel(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02 * world, momentum=0.9, weight_decay=1e-4)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        for image, target in train_loader:
            loss = criterion(model(image), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        hits = torch.zeros(2)
        with torch.inference_mode():
            for image, target in val_loader:
                hits += torch.tensor([(model(image).argmax(1) == target).sum().item(), len(target)])
        dist.all_reduce(hits)
        print(f"Epoch: [{epoch}] loss {loss.item():.4f} acc@1 {hits[0] / hits[1]:.3f}")
        if rank == 0:
            torch.save({"model": model.module.state_dict(), "epoch": epoch}, "checkpoint.pth")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
