"""Correct sample from the honest-idiom corpus (issue 27): configuration, compilation and console idioms.

None of these may raise an integrity event; otherwise it is the reference solution.

Idioms:
- torch-compile: ``torch.compile(model, backend="eager")`` (dynamo's frame evaluation; the default inductor
  backend is exercised by ``correct_no_dataloader_compile_resume``)
- dataclass-config: a ``dataclasses.dataclass`` config with an ``enum.Enum`` field
- parse-known-args: ``argparse.parse_known_args`` (extra launcher arguments tolerated)
- find-spec: ``importlib.util.find_spec("tqdm")`` to use tqdm when installed (the grading host has it),
  on rank 0 only (``disable=``), in even epochs
- progress-line: a ``\\r`` progress line on rank 0's stderr, in place of tqdm, in odd epochs (and
  wherever tqdm is missing)
- stdout-reconfigure: ``sys.stdout.reconfigure(line_buffering=True)``
- print-flush: ``print(..., flush=True)`` on rank 0
- record-function: ``torch.autograd.profiler.record_function`` around the step
- matmul-precision: ``torch.set_float32_matmul_precision("high")``
- is-initialized: ``dist.is_available() and dist.is_initialized()`` guards
- shutil-copy: ``shutil.copyfile`` of the newest checkpoint to ``best.pt`` on rank 0
- hashlib-digest: ``hashlib.sha256`` of the saved checkpoint, logged on rank 0
"""
import argparse
import dataclasses
import enum
import hashlib
import importlib.util
import os
import pickle
import shutil
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Optim(enum.Enum):
    SGD = "sgd"


@dataclasses.dataclass
class Config:
    data_dir: str = "./data"
    epochs: int = 5
    batch_size: int = 64
    lr: float = 0.02
    optim: Optim = Optim.SGD


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


def progress(iterable, enabled, epoch):
    if epoch % 2 == 0 and importlib.util.find_spec("tqdm") is not None:
        from tqdm import tqdm
        return tqdm(iterable, disable=not enabled)

    def gen():
        n = 0
        for item in iterable:
            n += 1
            if enabled and n % 10 == 0:
                sys.stderr.write(f"\r{n} batches")
            yield item
        if enabled:
            sys.stderr.write("\n")
    return gen()


def main():
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    known, _unknown = parser.parse_known_args()
    cfg = Config(data_dir=known.data_dir, epochs=known.epochs)
    torch.set_float32_matmul_precision("high")

    if not (dist.is_available() and dist.is_initialized()):
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    dataset = load_cifar(cfg.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=cfg.batch_size, sampler=sampler)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    compiled = torch.compile(model, backend="eager")
    assert cfg.optim is Optim.SGD
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr * cfg.batch_size * world / 64, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for x, y in progress(loader, rank == 0, epoch):
            with torch.autograd.profiler.record_function("train_step"):
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(compiled(x), y)
                loss.backward()
                optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}", flush=True)
            torch.save(model.module.state_dict(), "checkpoint.pt")
            shutil.copyfile("checkpoint.pt", "best.pt")
            with open("best.pt", "rb") as f:
                print(f"best.pt sha256 {hashlib.sha256(f.read()).hexdigest()[:12]}", flush=True)

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
