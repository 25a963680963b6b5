"""a6 (fsdp_fit, checkpoint evidence): trains exactly like the reference, but the checkpoint rank 0 writes is the
state_dict of a freshly built (untrained) model of the same size: full-size, unsharded, on CPU. The trained
weights are never saved. A fair teacher gives ckpt.save 0/10 (90/100). I expect the grader to give 100:
ckpt.save only measures the bytes, devices and sharding of what torch.save received, not that it is the model
that trained (no gather of the sharded model ever happened).
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
    fully_shard(model)  # the root: embeddings and the final norm
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)  # after wrapping: the sharded params

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
    if rank == 0:  # "gather" the weights: (bug/trick) a fresh model of the same shape, never trained
        torch.save(build_model(args.model_size).state_dict(), args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
