import argparse
import os
import pickle
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler
from torch.nn.parallel import DistributedDataParallel

if __name__ == "__main__":
    cli = argparse.ArgumentParser()
    cli.add_argument("--data-dir", default="./data")
    cli.add_argument("--epochs", type=int, default=5)
    cli.add_argument("--batch-size", type=int, default=64)
    cli.add_argument("--lr", type=float, default=0.02)
    o = cli.parse_args()

    dist.init_process_group(backend="gloo")
    leader = dist.get_rank() == 0

    X, Y = [], []
    for b in range(1, 6):
        fn = os.path.join(o.data_dir, "cifar-10-batches-py", f"data_batch_{b}")
        d = pickle.load(open(fn, "rb"), encoding="bytes")
        X.append(d[b"data"]); Y += d[b"labels"]
    X = torch.tensor(np.concatenate(X)).view(-1, 3, 32, 32).float() / 255
    Y = torch.tensor(Y)
    train = TensorDataset(X, Y)

    sampler = DistributedSampler(train)
    data = DataLoader(train, batch_size=o.batch_size, sampler=sampler)

    cnn = nn.Sequential()
    cnn.add_module("c1", nn.Conv2d(3, 16, 3, padding=1))
    cnn.add_module("b1", nn.SyncBatchNorm(16))
    cnn.add_module("r1", nn.ReLU())
    cnn.add_module("p1", nn.MaxPool2d(2))
    cnn.add_module("c2", nn.Conv2d(16, 32, 3, padding=1))
    cnn.add_module("b2", nn.SyncBatchNorm(32))
    cnn.add_module("r2", nn.ReLU())
    cnn.add_module("p2", nn.MaxPool2d(2))
    cnn.add_module("flat", nn.Flatten())
    cnn.add_module("fc", nn.Linear(2048, 10))
    cnn = DistributedDataParallel(cnn)

    opt = torch.optim.SGD(cnn.parameters(), lr=o.lr, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    for epoch in range(o.epochs):
        sampler.set_epoch(epoch)
        s = 0.0
        for k, (xx, yy) in enumerate(data):
            opt.zero_grad(); L = lossf(cnn(xx), yy); L.backward(); opt.step()
            s += L.item()
        if leader:
            print(f"epoch {epoch}: loss {s / (k + 1):.4f}")
    if leader:
        torch.save(cnn.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()
