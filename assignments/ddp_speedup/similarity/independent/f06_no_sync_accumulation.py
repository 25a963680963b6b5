"""Gradient accumulation over 2 micro-batches, skipping the all-reduce on the first (no_sync)."""
import argparse
import contextlib
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUM = 2


def load(data_dir):
    out_x, out_y = [], []
    for part in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"):
        with open(os.path.join(data_dir, "cifar-10-batches-py", part), "rb") as stream:
            record = pickle.load(stream, encoding="bytes")
        out_x.append(torch.from_numpy(np.asarray(record[b"data"])))
        out_y.append(torch.tensor(record[b"labels"]))
    return TensorDataset(torch.cat(out_x).float().mul(1 / 255).reshape(-1, 3, 32, 32), torch.cat(out_y))


def model_fn():
    return nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), nn.BatchNorm2d(24), nn.GELU(), nn.MaxPool2d(2),
                         nn.Conv2d(24, 48, 3, padding=1), nn.BatchNorm2d(48), nn.GELU(), nn.MaxPool2d(2),
                         nn.Conv2d(48, 96, 3, padding=1), nn.BatchNorm2d(96), nn.GELU(),
                         nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(96, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="./data")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    cfg = ap.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(11)
    data = load(cfg.data_dir)
    sampler = DistributedSampler(data)
    micro = DataLoader(data, batch_size=cfg.batch_size // ACCUM, sampler=sampler)
    ddp = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(model_fn()))
    opt = torch.optim.SGD(ddp.parameters(), lr=cfg.lr, momentum=0.9)
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        seen_loss = []
        for step, (x, y) in enumerate(micro):
            last = (step + 1) % ACCUM == 0
            ctx = contextlib.nullcontext() if last else ddp.no_sync()
            with ctx:
                loss = nn.functional.cross_entropy(ddp(x), y) / ACCUM
                loss.backward()
            if last:
                opt.step()
                opt.zero_grad()
            seen_loss.append(loss.item() * ACCUM)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {np.mean(seen_loss):.4f}")
            torch.save(ddp.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
