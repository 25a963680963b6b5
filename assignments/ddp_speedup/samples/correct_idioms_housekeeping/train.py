"""Correct sample from the honest-idiom corpus (issue 27): housekeeping that honest scripts do.

None of these may raise an integrity event; otherwise it is the reference solution.

Idioms:
- gc-collect: ``import gc; gc.collect()`` after every epoch
- cuda-empty-cache: ``torch.cuda.empty_cache()`` after every epoch (a no-op without a GPU)
- logging-basicconfig: ``logging.basicConfig`` with file and line in the format, INFO on rank 0 only
- logging-getlogger: a module logger, ``log.info`` on rank 0
- warnings-filter: ``warnings.filterwarnings`` and ``warnings.simplefilter``
- warnings-catch: ``warnings.catch_warnings()`` around a noisy call
- faulthandler: ``faulthandler.enable(all_threads=True)``
- env-reads: ``os.environ`` reads (LOCAL_RANK, WORLD_SIZE, OMP_NUM_THREADS) and ``setdefault``
- seeding: ``random.seed``, ``numpy.random.seed``, ``torch.manual_seed``
- perf-counter: ``time.perf_counter`` epoch timing printed on rank 0
- pathlib-rank0: ``pathlib.Path.mkdir`` and ``write_text`` of a metrics file on rank 0
- json-metrics: ``json.dumps`` of the metrics
"""
import argparse
import faulthandler
import gc
import json
import logging
import os
import pickle
import random
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

log = logging.getLogger("train")


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
    faulthandler.enable(all_threads=True)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.simplefilter("default", UserWarning)
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_env = int(os.environ.get("WORLD_SIZE", "1"))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == world_env
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format="%(asctime)s %(filename)s:%(lineno)d [rank %(rank)s] %(message)s".replace(
                            "%(rank)s", str(rank)))
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * args.batch_size * world / 64, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    out = Path("runs") / f"seed{args.seed}"
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)

    metrics = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        started = time.perf_counter()
        total, count = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gc.collect()
            torch.cuda.empty_cache()
        metrics.append({"epoch": epoch, "loss": total / count, "seconds": round(time.perf_counter() - started, 3)})
        if rank == 0:
            log.info("epoch %d: loss %.4f (%.1f s, local rank %d)", epoch, total / count, metrics[-1]["seconds"],
                     local_rank)
            torch.save(model.module.state_dict(), out / "checkpoint.pt")
            (out / "metrics.json").write_text(json.dumps(metrics))

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
