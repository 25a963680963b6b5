"""HW1 without argparse: settings come from environment variables."""
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = int(os.getenv("EPOCHS", "5"))
BATCH = int(os.getenv("BATCH", "64"))
BASE_LR = float(os.getenv("LR", "0.02"))
DATA = os.getenv("DATA_DIR", "./data")


def cifar_tensors(root):
    def one(path):
        with open(path, "rb") as fp:
            return pickle.load(fp, encoding="bytes")
    parts = [one(f"{root}/cifar-10-batches-py/data_batch_{j}") for j in range(1, 6)]
    x = np.vstack([p[b"data"] for p in parts]).astype(np.float32) / 255.0
    y = np.hstack([np.asarray(p[b"labels"]) for p in parts])
    return torch.from_numpy(x).reshape(len(y), 3, 32, 32), torch.from_numpy(y).long()


def conv_bn(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


def network():
    layers = conv_bn(3, 32) + [nn.MaxPool2d(2)] + conv_bn(32, 64) + [nn.MaxPool2d(2)]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    ws, rk = dist.get_world_size(), dist.get_rank()
    torch.manual_seed(3)
    dataset = TensorDataset(*cifar_tensors(DATA))
    sampler = DistributedSampler(dataset, seed=3)
    dl = DataLoader(dataset, BATCH, sampler=sampler)
    net = DistributedDataParallel(nn.SyncBatchNorm.convert_sync_batchnorm(network()))
    sgd = torch.optim.SGD(net.parameters(), BASE_LR * ws, momentum=0.9)
    for ep in range(EPOCHS):
        sampler.set_epoch(ep)
        for inp, tgt in dl:
            sgd.zero_grad()
            F.cross_entropy(net(inp), tgt).backward()
            sgd.step()
        if rk == 0:
            with torch.no_grad():
                probe = F.cross_entropy(net(inp), tgt).item()
            print("ep=%d loss=%.4f" % (ep, probe))
            torch.save(net.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()
