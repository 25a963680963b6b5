"""An Experiment object configured by a dataclass."""
from __future__ import annotations

import argparse
import os
import pickle
from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import distributed as tdist, nn
from torch.nn.parallel import DistributedDataParallel as Wrapped
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class Config:
    data_dir: str = "./data"
    epochs: int = 5
    batch_size: int = 64
    lr: float = 0.02

    @classmethod
    def from_cli(cls) -> "Config":
        ap = argparse.ArgumentParser()
        for f in fields(cls):
            ap.add_argument("--" + f.name.replace("_", "-"), type=f.type if f.type != "str" else str, default=f.default)
        ns = ap.parse_args()
        return cls(data_dir=ns.data_dir, epochs=int(ns.epochs), batch_size=int(ns.batch_size), lr=float(ns.lr))


class Experiment:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        tdist.init_process_group("gloo")
        self.rank = tdist.get_rank()
        self.world = tdist.get_world_size()
        self.data = self._dataset()
        self.sampler = DistributedSampler(self.data, shuffle=True)
        self.loader = DataLoader(self.data, batch_size=cfg.batch_size, sampler=self.sampler)
        net = nn.Sequential(nn.Conv2d(3, 20, 5), nn.BatchNorm2d(20), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(20, 40, 5), nn.BatchNorm2d(40), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(40 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 10))
        self.model = Wrapped(nn.SyncBatchNorm.convert_sync_batchnorm(net))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.lr * self.world, momentum=0.9)

    def _dataset(self) -> TensorDataset:
        arrays, targets = [], []
        for idx in range(1, 6):
            with open(os.path.join(self.cfg.data_dir, "cifar-10-batches-py", "data_batch_" + str(idx)), "rb") as fd:
                blob = pickle.load(fd, encoding="bytes")
            arrays.append(np.asarray(blob[b"data"], dtype=np.uint8))
            targets.extend(int(t) for t in blob[b"labels"])
        images = torch.as_tensor(np.concatenate(arrays), dtype=torch.float32).div(255.0).unflatten(1, (3, 32, 32))
        return TensorDataset(images, torch.as_tensor(targets))

    def run(self) -> None:
        for epoch in range(self.cfg.epochs):
            self.sampler.set_epoch(epoch)
            mean = self._epoch()
            if self.rank == 0:
                print(f"epoch {epoch}: loss {mean:.4f}")
                torch.save(self.model.module.state_dict(), "checkpoint.pt")
        tdist.destroy_process_group()

    def _epoch(self) -> float:
        self.model.train()
        losses = [self._step(x, y) for x, y in self.loader]
        return sum(losses) / len(losses)

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


if __name__ == "__main__":
    Experiment(Config.from_cli()).run()
