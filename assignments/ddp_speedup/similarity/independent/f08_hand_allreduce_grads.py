"""No DDP wrapper: gradients averaged by hand with all_reduce after backward."""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def average_gradients(model, world):
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad /= world


def broadcast_parameters(model):
    for tensor in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(tensor.data, src=0)


def cifar(root):
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(root, "cifar-10-batches-py", "data_batch_%i" % i), "rb") as fin:
            dct = pickle.load(fin, encoding="bytes")
        xs.append(dct[b"data"])
        ys.append(np.array(dct[b"labels"]))
    return TensorDataset(torch.tensor(np.concatenate(xs) / 255.0, dtype=torch.float).view(-1, 3, 32, 32),
                         torch.tensor(np.concatenate(ys)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    train = cifar(args.data_dir)
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2048, 10)))
    broadcast_parameters(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            average_gradients(model, world)
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
            torch.save(model.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
