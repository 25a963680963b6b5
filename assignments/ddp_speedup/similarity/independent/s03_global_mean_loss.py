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

def reduce_mean(value, world):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.item() / world


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    ds = load_cifar(args.data_dir)
    smp = DistributedSampler(ds, shuffle=True, seed=7)
    dl = DataLoader(ds, batch_size=args.batch_size, sampler=smp)
    m = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    sgd = torch.optim.SGD(m.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
    ce = nn.CrossEntropyLoss()
    for e in range(args.epochs):
        smp.set_epoch(e)
        acc_loss, steps = 0.0, 0
        for xb, yb in dl:
            sgd.zero_grad()
            batch_loss = ce(m(xb), yb)
            batch_loss.backward()
            sgd.step()
            acc_loss += batch_loss.item()
            steps += 1
        mean = reduce_mean(acc_loss / max(steps, 1), n)
        if me == 0:
            print(f"[epoch {e}] global mean loss = {mean:.3f}")
            torch.save(m.module.state_dict(), "checkpoint.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
