"""Correct sample from the honest-idiom corpus (issue 27), homework 3: memory-minded housekeeping.

FSDP2 per-block ``fully_shard`` and a distributed checkpoint (as ``correct_fsdp2_dcp``). None of these
may raise an integrity event.

Idioms:
- fsdp-gc-collect: ``gc.collect()`` before the checkpoint and ``gc.freeze()`` after start-up
- fsdp-empty-cache: ``torch.cuda.empty_cache()`` and ``torch.cuda.reset_peak_memory_stats()`` guarded by
  ``torch.cuda.is_available()``
- fsdp-memory-log: ``torch.cuda.max_memory_allocated`` or ``resource.getrusage`` logged on rank 0
- fsdp-logging: ``logging.basicConfig`` + ``logging.getLogger(__name__)`` with rank-0-only INFO
- fsdp-warnings: ``warnings.filterwarnings("ignore", message=...)`` for FSDP's deprecation notes
- fsdp-env: ``os.environ.get`` of LOCAL_RANK, RANK and WORLD_SIZE
- fsdp-seeds: ``random.seed``, ``numpy.random.seed``, ``torch.manual_seed``
- fsdp-faulthandler: ``faulthandler.enable()`` and ``faulthandler.dump_traceback_later`` as a watchdog
  (cancelled at the end)
- fsdp-pathlib: ``pathlib.Path`` for the checkpoint folder, made on rank 0 after a barrier
- fsdp-time: ``time.perf_counter`` step timing on rank 0
"""
import argparse
import faulthandler
import gc
import logging
import os
import random
import resource
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler

from model import SIZES, build_model, make_dataset

log = logging.getLogger(__name__)


def peak_memory() -> str:
    if torch.cuda.is_available():
        return f"{torch.cuda.max_memory_allocated() / 2**20:.0f} MiB on the GPU"
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB resident"


def main():
    faulthandler.enable()
    faulthandler.dump_traceback_later(600, exit=False)
    warnings.filterwarnings("ignore", message=".*deprecated.*")
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-size", default="tiny", choices=sorted(SIZES))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--save", default="ckpt.pt")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank = int(os.environ.get("RANK", dist.get_rank()))
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, format="%(levelname)s %(message)s")
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats()
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)

    model = build_model(args.model_size)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    gc.freeze()  # start-up objects live for the whole run: keep them out of later collections

    data = make_dataset(args.model_size)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, sampler=sampler, drop_last=True)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for input_ids, labels in loader:
            started = time.perf_counter()
            loss = model(input_ids.to(device), labels.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if rank == 0:
                log.info("step %d loss %.3f (%.2f s)", step, loss.item(), time.perf_counter() - started)
            if step == args.steps:
                break
        epoch += 1

    gc.collect()
    if use_cuda:
        torch.cuda.empty_cache()
    if rank == 0:
        log.info("peak memory: %s", peak_memory())
    folder = Path(args.save + ".dcp")
    if rank == 0:
        folder.parent.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    import torch.distributed.checkpoint as dcp
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=str(folder))
    faulthandler.cancel_dump_traceback_later()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
