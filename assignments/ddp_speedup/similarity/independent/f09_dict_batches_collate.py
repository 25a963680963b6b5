"""Batches as dicts through a collate function; a metric tracker class."""
import argparse
import os
import pickle
from collections import defaultdict

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Images(Dataset):
    def __init__(self, arrays, labels):
        self.arrays, self.labels = arrays, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, k):
        return {"image": self.arrays[k], "label": self.labels[k]}


def collate(items):
    return {"image": torch.stack([torch.from_numpy(it["image"]) for it in items]).float().div(255),
            "label": torch.tensor([it["label"] for it in items])}


class Tracker:
    def __init__(self):
        self.sums = defaultdict(float)
        self.n = 0

    def add(self, **values):
        for key, v in values.items():
            self.sums[key] += v
        self.n += 1

    def means(self):
        return {key: v / max(self.n, 1) for key, v in self.sums.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="./data")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    hp = ap.parse_args()
    dist.init_process_group(backend="gloo")
    chunks, labels = [], []
    for i in range(1, 6):
        with open(f"{hp.data_dir}/cifar-10-batches-py/data_batch_{i}", "rb") as fh:
            raw = pickle.load(fh, encoding="bytes")
        chunks.append(raw[b"data"].reshape(-1, 3, 32, 32))
        labels.extend(raw[b"labels"])
    ds = Images(np.concatenate(chunks), labels)
    sampler = DistributedSampler(ds, shuffle=True)
    loader = DataLoader(ds, batch_size=hp.batch_size, sampler=sampler, collate_fn=collate)
    body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.SiLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.SiLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(2048, 10))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(body))
    optimizer = torch.optim.SGD(model.parameters(), lr=hp.lr, momentum=0.9)
    for epoch in range(hp.epochs):
        sampler.set_epoch(epoch)
        tracker = Tracker()
        for batch in loader:
            logits = model(batch["image"])
            loss = nn.functional.cross_entropy(logits, batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            tracker.add(loss=loss.item(), acc=(logits.argmax(-1) == batch["label"]).float().mean().item())
        if dist.get_rank() == 0:
            m = tracker.means()
            print(f"epoch {epoch}: loss {m['loss']:.4f} acc {m['acc']:.3f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
