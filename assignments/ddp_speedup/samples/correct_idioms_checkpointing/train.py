"""Correct sample from the honest-idiom corpus (issue 27): checkpointing and error-handling idioms.

None of these may raise an integrity event; otherwise it is the reference solution.

Idioms:
- signal-handler: ``signal.signal(SIGTERM/SIGUSR2, ...)`` that asks for a checkpoint at the next step
- atexit: ``atexit.register`` of a rank-0 goodbye (runs before the grader's own exit handler)
- excepthook-chain: a ``sys.excepthook`` that logs and chains to the previous one
- traceback-print-exc: ``traceback.print_exc()`` after a failed ``torch.save`` (the traceback passes through
  the grader's patched ``torch.save``)
- logging-exception: ``log.exception`` of the same failure
- traceback-format-stack: ``traceback.format_stack()`` in a rank-0 debug line
- inspect-signature: ``inspect.signature`` of the model's forward
- inspect-caller: a log helper naming its caller with ``inspect.currentframe().f_back``
- sys-getframe-caller: the same with ``sys._getframe(1)``
- contextlib-suppress: ``contextlib.suppress(FileNotFoundError)`` around removing an old checkpoint
- contextlib-nullcontext: ``contextlib.nullcontext()`` as the no-op twin of ``torch.no_grad()``
- functools-lru-cache: ``functools.lru_cache`` on the learning-rate schedule
- functools-partial: ``functools.partial`` for the loss
- atomic-save: ``tempfile.NamedTemporaryFile`` + ``os.replace`` on rank 0
- resume: ``torch.load(weights_only=True)`` of the newest checkpoint when one exists
"""
import argparse
import atexit
import contextlib
import functools
import inspect
import logging
import os
import pickle
import signal
import sys
import tempfile
import traceback

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

log = logging.getLogger(__name__)
STOP = {"checkpoint": False}


def where() -> str:
    """The calling function's name, for log lines."""
    return f"{inspect.currentframe().f_back.f_code.co_name}/{sys._getframe(1).f_lineno}"


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


@functools.lru_cache(maxsize=None)
def lr_at(epoch: int, base: float, epochs: int) -> float:
    return base * (0.5 if epoch >= max(1, epochs // 2) else 1.0)


def save_atomically(state, path: str) -> None:
    with tempfile.NamedTemporaryFile(dir=os.path.dirname(os.path.abspath(path)), delete=False) as tmp:
        torch.save(state, tmp)
    os.replace(tmp.name, path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.ERROR, format="%(levelname)s %(message)s")
    previous = sys.excepthook

    def excepthook(*exc):
        log.error("rank %d failed", rank)
        previous(*exc)
    sys.excepthook = excepthook
    for sig in (signal.SIGTERM, signal.SIGUSR2):
        signal.signal(sig, lambda signum, frame: STOP.update(checkpoint=True))
    if rank == 0:
        atexit.register(lambda: print("rank 0 done"))
    torch.manual_seed(0)

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    net = nn.SyncBatchNorm.convert_sync_batchnorm(make_model())
    if rank == 0:
        log.info("%s: forward%s", where(), inspect.signature(net.forward))
        log.debug("".join(traceback.format_stack(limit=3)))
    start = 0
    if os.path.exists("last.pt"):
        state = torch.load("last.pt", map_location="cpu", weights_only=True)
        net.load_state_dict(state["model"])
        start = state["epoch"] + 1
    model = DDP(net)
    base = args.lr * args.batch_size * world / 64
    optimizer = torch.optim.SGD(model.parameters(), lr=base, momentum=0.9)
    loss_fn = functools.partial(F.cross_entropy, label_smoothing=0.0)

    for epoch in range(start, args.epochs):
        sampler.set_epoch(epoch)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(epoch, base, args.epochs)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        with contextlib.nullcontext():
            mean = total / count
        if rank == 0:
            log.info("%s: epoch %d loss %.4f", where(), epoch, mean)
            with contextlib.suppress(FileNotFoundError):
                os.remove("previous.pt")
            try:  # a cluster path first, as the course's cluster has one; here it does not exist
                torch.save(model.module.state_dict(), "/nonexistent-cluster-scratch/ckpt.pt")
            except (OSError, RuntimeError):
                traceback.print_exc()
                log.exception("no cluster scratch; saving locally")
                save_atomically({"model": model.module.state_dict(), "epoch": epoch}, "last.pt")
        if STOP["checkpoint"]:
            break

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
