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
    args = parser.parse_args()

    world_size = int(os.environ["WORLD_SIZE"])
    global_rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=global_rank, world_size=world_size)
    torch.manual_seed(0)

    data = load_cifar(args.data_dir)
    train_sampler = DistributedSampler(data, num_replicas=world_size, rank=global_rank, shuffle=True)
    train_loader = DataLoader(data, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)

    net = make_model()
    net = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    ddp_net = DDP(net)
    opt = torch.optim.SGD(ddp_net.parameters(), lr=args.lr * world_size, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    for ep in range(args.epochs):
        train_sampler.set_epoch(ep)
        running = []
        for inputs, labels in train_loader:
            opt.zero_grad()
            out = ddp_net(inputs)
            l = criterion(out, labels)
            l.backward()
            opt.step()
            running.append(l.item())
        if global_rank == 0:
            print("epoch", ep, "mean loss", sum(running) / len(running), flush=True)
    if global_rank == 0:
        torch.save(net.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
