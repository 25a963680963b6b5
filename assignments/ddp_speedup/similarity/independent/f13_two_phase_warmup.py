"""Linear warm-up for the first epoch, then constant; loss averaged across ranks with all_reduce."""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def warmup_factor(step, warm_steps):
    return min(1.0, (step + 1) / warm_steps)


def load_all(root):
    x_parts, y_parts = [], []
    for idx in range(1, 6):
        name = os.path.join(root, "cifar-10-batches-py", "data_batch_{}".format(idx))
        with open(name, "rb") as fobj:
            content = pickle.load(fobj, encoding="bytes")
        x_parts.append(content[b"data"])
        y_parts.append(content[b"labels"])
    x = torch.tensor(np.concatenate(x_parts), dtype=torch.uint8).view(-1, 3, 32, 32)
    y = torch.tensor(np.concatenate(y_parts), dtype=torch.int64)
    return TensorDataset(x.float() / 255.0, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="./data")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    opt_args = ap.parse_args()
    dist.init_process_group("gloo")
    rank_id = dist.get_rank()
    ds = load_all(opt_args.data_dir)
    sampler = DistributedSampler(ds, shuffle=True)
    loader = DataLoader(ds, batch_size=opt_args.batch_size, sampler=sampler)
    model = nn.Sequential(nn.Conv2d(3, 12, 3, padding=1), nn.BatchNorm2d(12), nn.LeakyReLU(0.1),
                          nn.MaxPool2d(2), nn.Conv2d(12, 24, 3, padding=1), nn.BatchNorm2d(24),
                          nn.LeakyReLU(0.1), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(24 * 64, 10))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(model))
    optimizer = torch.optim.SGD(model.parameters(), lr=opt_args.lr, momentum=0.9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_factor(s, len(loader)))
    for epoch in range(opt_args.epochs):
        sampler.set_epoch(epoch)
        summary = torch.zeros(2)
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            schedule.step()
            summary += torch.tensor([loss.item() * len(labels), len(labels)])
        dist.all_reduce(summary)
        if rank_id == 0:
            print("epoch %d: loss %.4f" % (epoch, summary[0] / summary[1]))
            torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
