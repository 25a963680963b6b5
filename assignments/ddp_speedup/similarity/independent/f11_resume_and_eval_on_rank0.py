"""Resumes from checkpoint.pt if present; rank 0 evaluates on the test batch after training."""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CKPT = "checkpoint.pt"


def unpickle(path):
    with open(path, "rb") as handle:
        return pickle.load(handle, encoding="bytes")


def tensors(dicts):
    x = np.concatenate([d[b"data"] for d in dicts]).reshape(-1, 3, 32, 32)
    y = np.concatenate([d[b"labels"] for d in dicts])
    return torch.tensor(x, dtype=torch.float32) / 255, torch.tensor(y, dtype=torch.long)


class Model(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(0.2), nn.Linear(2048, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="./data")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    me = dist.get_rank()
    root = os.path.join(args.data_dir, "cifar-10-batches-py")
    train = TensorDataset(*tensors([unpickle(os.path.join(root, "data_batch_%d" % i)) for i in range(1, 6)]))
    model = Model()
    start = 0
    if os.path.exists(CKPT):
        saved = torch.load(CKPT)
        model.load_state_dict(saved["weights"])
        start = saved["epoch"] + 1
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(model))
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(start, args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        if me == 0:
            torch.save({"epoch": epoch, "weights": model.module.state_dict()}, CKPT)
            print(f"epoch {epoch}: saved")
    test_path = os.path.join(root, "test_batch")
    if me == 0 and os.path.exists(test_path):
        tx, ty = tensors([unpickle(test_path)])
        model.module.eval()
        with torch.no_grad():
            print("test accuracy", (model.module(tx).argmax(1) == ty).float().mean().item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
