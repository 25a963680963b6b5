"""Correct sample from the honest-idiom corpus (issue 27), homework 3: checkpointing and error handling.

FSDP1, FULL_SHARD, one unit per Block, a rank-0 full state dict on CPU (as ``correct_fsdp1``). None of
these may raise an integrity event.

Idioms:
- fsdp-signal: ``signal.signal(SIGTERM, ...)`` asking for an early checkpoint
- fsdp-atexit: ``atexit.register`` of a rank-0 goodbye
- fsdp-excepthook: a chained ``sys.excepthook``
- fsdp-traceback: ``traceback.print_exc()`` + ``logging.exception`` after a ``torch.save`` into a missing
  folder (through the grader's patched ``torch.save``), then the local save
- fsdp-inspect: ``inspect.signature(model.forward)`` and a caller-naming helper with ``sys._getframe(1)``
- fsdp-contextlib: ``contextlib.ExitStack`` holding the state-dict context, ``contextlib.suppress``
- fsdp-functools: ``functools.lru_cache`` warm-up schedule and ``functools.wraps`` on a timing decorator
- fsdp-thread: a ``threading.Event`` heartbeat thread on rank 0
- fsdp-workers: ``DataLoader(num_workers=1)``
- fsdp-atomic: ``tempfile.mkstemp`` + ``os.replace`` for the rank-0 checkpoint
"""
import argparse
import atexit
import contextlib
import functools
import inspect
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import traceback

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullStateDictConfig, ShardingStrategy, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.utils.data import DataLoader, DistributedSampler

from model import SIZES, Block, build_model, make_dataset

log = logging.getLogger("fsdp")
WANT = {"checkpoint": False}


def caller() -> str:
    return sys._getframe(1).f_code.co_name


def timed(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            log.debug("%s took %.3f s", fn.__name__, time.perf_counter() - started)
    return inner


@functools.lru_cache(maxsize=256)
def warmup(step: int, total: int) -> float:
    return min(1.0, (step + 1) / max(1, total // 10))


@timed
def save_rank0(state, path: str) -> None:
    try:
        torch.save(state, os.path.join("/nonexistent-scratch", path))
    except (OSError, RuntimeError):
        traceback.print_exc()
        log.exception("%s: no scratch folder, saving beside the script", caller())
    fd, tmp = tempfile.mkstemp(dir=".", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        torch.save(state, f)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-size", default="tiny", choices=sorted(SIZES))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--save", default="ckpt.pt")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank = dist.get_rank()
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.ERROR, format="%(levelname)s %(message)s")
    previous = sys.excepthook
    sys.excepthook = lambda *exc: (log.error("rank %d crashed", rank), previous(*exc))
    signal.signal(signal.SIGTERM, lambda signum, frame: WANT.update(checkpoint=True))
    beat = threading.Event()
    if rank == 0:
        atexit.register(lambda: print("rank 0: bye"))
        threading.Thread(target=lambda: beat.wait(3600), daemon=True).start()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)

    model = build_model(args.model_size)
    if rank == 0:
        log.info("forward%s", inspect.signature(model.forward))
    model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, auto_wrap_policy=ModuleWrapPolicy({Block}),
                 device_id=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    data = make_dataset(args.model_size)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, sampler=sampler, drop_last=True,
                        num_workers=1)
    step, epoch = 0, 0
    while step < args.steps and not WANT["checkpoint"]:
        sampler.set_epoch(epoch)
        for input_ids, labels in loader:
            for group in optimizer.param_groups:
                group["lr"] = args.lr * warmup(step, args.steps)
            loss = model(input_ids.to(device), labels.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if rank == 0:
                log.info("step %d loss %.3f", step, loss.item())
            if step == args.steps:
                break
        epoch += 1

    cfg = FullStateDictConfig(offload_to_cpu=use_cuda, rank0_only=True)
    with contextlib.ExitStack() as stack:
        stack.enter_context(FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg))
        state = model.state_dict()
    if rank == 0:
        with contextlib.suppress(FileNotFoundError):
            os.remove(args.save)
        save_rank0(state, args.save)
        beat.set()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
