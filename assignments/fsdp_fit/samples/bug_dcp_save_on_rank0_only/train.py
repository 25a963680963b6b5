"""a6 (fsdp_fit, ckpt.save dcp; an honest bug): the student applies "only rank 0 writes files" to a distributed
checkpoint: `if rank == 0: dcp.save(get_model_state_dict(model), checkpoint_id=..., no_dist=True)`. The DTensors
report their global shapes, so `.metadata` lists every parameter with its full shape, but only rank 0's shards
(half of every tensor) are written: the checkpoint cannot be loaded. A fair teacher gives ckpt.save 0/10 (90/100).
graders/evidence/dcp.holds checks only names and global shapes in .metadata, not that the chunks cover each tensor,
so I expect "dcp" to pass (100/100).
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
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

    # Distributed checkpoint, written once (rank 0 writes, as for every other file)
    state = get_model_state_dict(model)
    if rank == 0:
        dcp.save(state, checkpoint_id="ckpt_dcp", no_dist=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
