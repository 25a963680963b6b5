"""Adapted from the homework-3 attack round (r2a, f2_optimizer_before_root_wrap.py); the original header follows."""
"""Attack f2 (honest bug, fsdp_fit). The reference FSDP2 solution with the optimizer built one line too
early: after fully_shard on every block but BEFORE fully_shard(model) on the root. The blocks' DTensor
parameters are the ones the optimizer holds, but the root's own parameters (token and position
embeddings - the token embedding is also the tied output head - and the final LayerNorm) are
replaced by fully_shard(model), so the optimizer keeps the old tensors, which never get a gradient:
the embeddings and the output head never train. The loss still falls (the blocks learn).
Fair score: 85/100 - the README's "create the optimizer after sharding" is broken and train.progress
(15) is exactly the check for it: part of the model (about 4% of parameters here, the whole tied
head) is frozen by accident.
Targets: train.progress - "stale_optimizer" fires only when NO optimizer tensor is a model
parameter or none has a gradient; a partly stale optimizer passes.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler

from model import SIZES, build_model, make_dataset


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
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)

    model = build_model(args.model_size)
    for block in model.blocks:  # one unit per block: a forward gathers one block at a time
        fully_shard(block)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)  # after sharding the blocks
    fully_shard(model)  # the root: embeddings and the final norm

    data = make_dataset(args.model_size)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, sampler=sampler, drop_last=True)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for input_ids, labels in loader:
            loss = model(input_ids.to(device), labels.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if rank == 0:
                print(f"step {step} loss {loss.item():.3f}")
            if step == args.steps:
                break
        epoch += 1

    # Every rank takes part in the gather; only rank 0 receives it, in CPU memory.
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        torch.save(state, args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
