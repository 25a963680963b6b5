"""Optional bf16 autocast on CPU, a OneCycle schedule, and a progress line every 50 steps."""
import argparse
import os
import pickle
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def args_():
    pa = argparse.ArgumentParser()
    pa.add_argument("--data-dir", default="./data")
    pa.add_argument("--epochs", type=int, default=5)
    pa.add_argument("--batch-size", type=int, default=64)
    pa.add_argument("--lr", type=float, default=0.02)
    pa.add_argument("--bf16", action="store_true")
    return pa.parse_args()


def data(root):
    def batch(n):
        with open(os.path.join(root, "cifar-10-batches-py", "data_batch_" + str(n)), "rb") as fo:
            return pickle.load(fo, encoding="bytes")
    bs = [batch(n) for n in (1, 2, 3, 4, 5)]
    images = torch.from_numpy(np.concatenate([b[b"data"] for b in bs])).float().reshape(-1, 3, 32, 32)
    images = (images / 127.5) - 1.0
    labels = torch.tensor([lab for b in bs for lab in b[b"labels"]])
    return TensorDataset(images, labels)


def convnet():
    chans = [3, 16, 32, 64]
    mods = []
    for cin, cout in zip(chans, chans[1:]):
        mods += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*mods, nn.Flatten(), nn.Linear(64 * 4 * 4, 10))


def main():
    a = args_()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    train = data(a.data_dir)
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=a.batch_size, sampler=sampler)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(convnet()))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr * 2, total_steps=a.epochs * len(loader))
    for ep in range(a.epochs):
        sampler.set_epoch(ep)
        for it, (x, y) in enumerate(loader):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            if rank == 0 and it % 50 == 0:
                sys.stdout.write(f"\rep {ep} it {it}/{len(loader)} loss {loss.item():.3f}")
        if rank == 0:
            print(f"\nepoch {ep}: loss {loss.item():.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
