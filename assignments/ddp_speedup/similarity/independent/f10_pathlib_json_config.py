"""Reads defaults from an optional JSON file beside the script, CLI overrides them; pathlib everywhere."""
import argparse
import json
import pickle
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DEFAULTS = {"data_dir": "./data", "epochs": 5, "batch_size": 64, "lr": 0.02}


def settings():
    conf = dict(DEFAULTS)
    side = Path(__file__).with_suffix(".json")
    if side.exists():
        conf.update(json.loads(side.read_text()))
    parser = argparse.ArgumentParser()
    for key, value in conf.items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
    return parser.parse_args()


def dataset(root: Path) -> TensorDataset:
    files = sorted((root / "cifar-10-batches-py").glob("data_batch_*"))
    loaded = [pickle.loads(f.read_bytes(), encoding="bytes") for f in files]
    pixels = np.concatenate([d[b"data"] for d in loaded]).astype("float32") / 255
    targets = np.concatenate([np.asarray(d[b"labels"], dtype="int64") for d in loaded])
    return TensorDataset(torch.from_numpy(pixels).view(-1, 3, 32, 32), torch.from_numpy(targets))


def main():
    s = settings()
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    data = dataset(Path(s.data_dir))
    sampler = DistributedSampler(data, num_replicas=size, rank=rank)
    feed = DataLoader(data, batch_size=s.batch_size, sampler=sampler)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    net = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(net))
    opt = optim.SGD(net.parameters(), lr=s.lr * size, momentum=0.9)
    out = Path("checkpoint.pt")
    for epoch in range(s.epochs):
        sampler.set_epoch(epoch)
        values = []
        for xb, yb in feed:
            opt.zero_grad()
            loss = nn.CrossEntropyLoss()(net(xb), yb)
            loss.backward()
            opt.step()
            values.append(loss.item())
        if rank == 0:
            print(json.dumps({"epoch": epoch, "loss": round(float(np.mean(values)), 4)}))
            torch.save(net.module.state_dict(), out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
