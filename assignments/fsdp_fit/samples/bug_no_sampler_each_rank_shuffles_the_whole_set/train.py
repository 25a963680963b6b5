"""a5 (fsdp_fit, train.progress): no DistributedSampler: every rank shuffles the whole data set with its own seed.
Idea: a common misconception: "seed each rank differently so the ranks see different data". The DataLoader uses
shuffle=True with a generator seeded by the rank, so each rank walks the WHOLE data set in its own random order:
the data is not split, samples are trained on by both ranks in different steps. train.progress compares the
input-row digests of the two ranks only step by step (same rows in the same step), which independent shuffles
almost never produce; nothing looks at the whole run's overlap, nor at whether a DistributedSampler was used.
Fair teacher: the README requires a DistributedSampler and the data is not split: at least what the grader gives
for "every rank fed the same samples" (train.progress WARN at 0.2 of 15).
Graded 100 in round 6; now train.progress WARN not_split (88).
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
    gen = torch.Generator().manual_seed(1000 + rank)  # different data on each rank
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, shuffle=True, generator=gen,
                        drop_last=True)
    step, epoch = 0, 0
    while step < args.steps:
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
