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

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--clip", type=float, default=1.0)
    a = parser.parse_args()

    dist.init_process_group(backend="gloo")
    r = dist.get_rank()
    torch.manual_seed(0 + 0 * r)

    cifar = load_cifar(a.data_dir)
    s = DistributedSampler(cifar, shuffle=True, drop_last=True)
    it = DataLoader(cifar, batch_size=a.batch_size, sampler=s)

    model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model())
    model = DDP(model, find_unused_parameters=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr / 10, weight_decay=0.05)
    crit = nn.CrossEntropyLoss()

    history = []
    for epoch in range(a.epochs):
        s.set_epoch(epoch)
        for batch_x, batch_y in it:
            optimizer.zero_grad()
            loss = crit(model(batch_x), batch_y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            optimizer.step()
        history.append(loss.item())
        if r == 0:
            print("epoch {}: loss {:.4f}".format(epoch, history[-1]))
    if r == 0:
        torch.save(model.module.state_dict(), "checkpoint.pt")
        print("loss history:", ", ".join("%.3f" % h for h in history))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
