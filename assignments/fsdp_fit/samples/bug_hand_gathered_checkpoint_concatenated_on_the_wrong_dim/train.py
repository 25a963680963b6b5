"""a8 (fsdp_fit, ckpt.save): rank 0 saves a "full" checkpoint whose matrices are scrambled.
Idea: the student gathers the full state dict by hand: all_gather of every parameter's local shard, then
torch.cat along the LAST dimension (FSDP2 shards dim 0) and a reshape to the full shape. Vectors come out right,
but every matrix has its rows interleaved: the file cannot reproduce the trained model. The grader's ckpt.save
reading compares only the absolute sums of the tensors named like the parameters (same shape, same multiset of
values -> same sums), so the scrambled checkpoint "holds the trained weights".
Fair teacher: the checkpoint does not hold the trained model -> ckpt.save FAIL (-10).
Expected grader: ckpt.save PASS (rank0_cpu, sums match).
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

    # Gather the full state dict by hand, one parameter at a time, into rank 0's CPU memory.
    state = {}
    world = dist.get_world_size()
    for name, p in model.named_parameters():
        local = (p.to_local() if hasattr(p, "to_local") else p).detach().contiguous()
        sizes = [None] * world
        dist.all_gather_object(sizes, list(local.shape))
        rows = max(s[0] if s else 0 for s in sizes)
        padded = torch.zeros((rows,) + tuple(p.shape[1:]), dtype=local.dtype)
        padded[:local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(parts, padded)
        parts = [t[:s[0]] for t, s in zip(parts, sizes)]
        if rank == 0:
            dim = -1 if p.dim() > 1 else 0
            state[name] = torch.cat(parts, dim=dim).reshape(p.shape).clone()
    if rank == 0:
        torch.save(state, args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
