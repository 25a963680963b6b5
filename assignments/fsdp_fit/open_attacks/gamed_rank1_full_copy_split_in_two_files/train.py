"""a8 (fsdp_fit, ckpt.save every_rank): the reference solution, but rank 1 also gathers the full state dict and saves
it as a "backup", split into two torch.save files of about half the model each. A full copy on a rank other than 0
is what ckpt.save warns about (every_rank): a fair teacher does not give the full 10 (at most the warning's share).
The checkpoint check counts a save as a full copy only if one file holds >= 90% of the model's bytes, so I expect
rank0_cpu to pass (100/100).
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

    # every rank keeps a local backup of the full weights (split in two files so each stays small)
    backup = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    if rank != 0:
        keys = list(backup)
        os.makedirs(f"backup_{rank}", exist_ok=True)
        torch.save({k: backup[k].clone() for k in keys[: len(keys) // 2]}, f"backup_{rank}/part_a.pt")
        torch.save({k: backup[k].clone() for k in keys[len(keys) // 2:]}, f"backup_{rank}/part_b.pt")
    del backup
    # Every rank takes part in the gather; only rank 0 receives it, in CPU memory.
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        torch.save(state, args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
