"""HW1 distributed CIFAR-10 training (DDP) with validation split and early stopping."""
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


def load_split(base_dir, files):
    chunks, ys = [], []
    for fname in files:
        with open(os.path.join(base_dir, "cifar-10-batches-py", fname), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        chunks.append(d[b"data"])
        ys += list(d[b"labels"])
    x = torch.from_numpy(np.concatenate(chunks)).float().div_(255).view(-1, 3, 32, 32)
    mu = x.mean(dim=(0, 2, 3), keepdim=True)
    sigma = x.std(dim=(0, 2, 3), keepdim=True)
    return TensorDataset((x - mu) / sigma, torch.tensor(ys))


def carve_validation(ds, frac, rng_seed):
    perm = torch.randperm(len(ds), generator=torch.Generator().manual_seed(rng_seed)).tolist()
    boundary = int(len(perm) * (1 - frac))
    return Subset(ds, perm[:boundary]), Subset(ds, perm[boundary:])


class SmallCNN(nn.Module):
    def __init__(self, channels=16, n_out=10):
        super().__init__()
        self.conv_in = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU())
        self.body = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(channels, channels * 2, 3, padding=1),
                                   nn.BatchNorm2d(channels * 2), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(channels * 2 * 8 * 8, n_out)

    def forward(self, x):
        return self.fc(torch.flatten(self.body(self.conv_in(x)), 1))


class Runner:
    def __init__(self, network, pair, dev, lr, wait):
        self.network = network
        self.tr_dl, self.va_dl = pair
        self.dev = dev
        self.optimizer = torch.optim.SGD(network.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        self.loss_fn = nn.CrossEntropyLoss()
        self.wait = wait
        self.lowest = math.inf
        self.strikes = 0

    def fit_epoch(self):
        self.network.train()
        n, acc_loss = 0, torch.zeros(1, device=self.dev)
        for chunks, y in self.tr_dl:
            chunks, y = chunks.to(self.dev), y.to(self.dev)
            self.optimizer.zero_grad()
            l = self.loss_fn(self.network(chunks), y)
            l.backward()
            self.optimizer.step()
            acc_loss += l.detach() * y.numel()
            n += y.numel()
        return acc_loss.item() / max(n, 1)

    @torch.no_grad()
    def validate(self):
        self.network.eval()
        buf = torch.zeros(3, device=self.dev)
        for chunks, y in self.va_dl:
            chunks, y = chunks.to(self.dev), y.to(self.dev)
            out = self.network(chunks)
            buf[0] += self.loss_fn(out, y) * y.numel()
            buf[1] += (out.argmax(1) == y).sum()
            buf[2] += y.numel()
        dist.all_reduce(buf)
        return (buf[0] / buf[2]).item(), (buf[1] / buf[2]).item()

    def early_stop(self, vl):
        if vl < self.lowest - 1e-4:
            self.lowest, self.strikes = vl, 0
            return False
        self.strikes += 1
        return self.strikes >= self.wait


def get_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="./data")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--patience", type=int, default=3)
    return ap.parse_args()


def main():
    cfg = get_args()
    has_gpu = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if has_gpu else "gloo")
    my_rank, nproc = dist.get_rank(), dist.get_world_size()
    lrank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", lrank) if has_gpu else torch.device("cpu")
    torch.manual_seed(1234)
    everything = load_split(cfg.data_dir, [f"data_batch_{n}" for n in range(1, 6)])
    tr, va = carve_validation(everything, 0.1, rng_seed=1234)
    tr_sampler = DistributedSampler(tr, shuffle=True, seed=1234)
    va_sampler = DistributedSampler(va, shuffle=False)
    pair = (DataLoader(tr, batch_size=cfg.batch_size, sampler=tr_sampler),
               DataLoader(va, batch_size=256, sampler=va_sampler))
    ddp_net = nn.SyncBatchNorm.convert_sync_batchnorm(SmallCNN()).to(dev)
    ddp_net = DDP(ddp_net, device_ids=[lrank] if has_gpu else None)
    runner = Runner(ddp_net, pair, dev, cfg.lr * nproc * cfg.batch_size / 64, cfg.patience)
    for ep in range(cfg.epochs):
        tr_sampler.set_epoch(ep)
        t0 = time.time()
        tl = runner.fit_epoch()
        vl, va_acc = runner.validate()
        if my_rank == 0:
            print(f"epoch {ep}: loss {tl:.4f} val {vl:.4f} acc {va_acc:.3f} "
                  f"({time.time() - t0:.1f}s)")
            torch.save(ddp_net.module.state_dict(), "checkpoint.pt")
        if runner.early_stop(vl):
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
