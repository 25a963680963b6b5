"""Bug sample: plain BatchNorm whose weights a second optimizer steps (no weight decay on norms).

The common split: conv and linear weights in one SGD with weight decay, the BatchNorm
parameters in a second one without. DDP wraps the model, but the BatchNorm layers were never
converted to SyncBatchNorm. The first optimizer to step holds no BatchNorm weight, so a count
taken from it says "no BatchNorm layers". ddp.syncbn must warn about plain BatchNorm.
"""

import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


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
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=0.02, help="for a global batch of 64")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    lr = args.lr * args.batch_size * world / 64
    loss_fn = nn.CrossEntropyLoss()

    model = DDP(make_model())
    norms = [p for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) for p in m.parameters()]
    others = [p for p in model.parameters() if all(p is not q for q in norms)]
    decayed = torch.optim.SGD(others, lr=lr, momentum=0.9, weight_decay=5e-4)
    undecayed = torch.optim.SGD(norms, lr=lr, momentum=0.9)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            decayed.zero_grad(set_to_none=True)
            undecayed.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            decayed.step()
            undecayed.step()
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")

    dist.barrier()
    dist.destroy_process_group()



if __name__ == "__main__":
    main()
