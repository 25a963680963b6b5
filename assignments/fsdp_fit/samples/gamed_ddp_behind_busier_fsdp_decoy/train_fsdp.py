"""Adapted from the homework-3 attack round (r2a, f1_fsdp_decoy_runs_more_often.py); the original header follows."""
"""Attack f1 (trick, fsdp_fit). Plain DDP trains the real model (every rank keeps the whole model,
its gradients and AdamW states). Beside it, a fully_shard'ed copy of the model (one unit per block
plus the root) is run TWICE per step under autograd on a one-token input, and its (tiny-weighted)
loss joins the backward; its own AdamW steps first each step. The harness names "the model that
trained" the root with the most forwards under autograd (ties: the most parameters), so the
decoy - two forwards per step against the DDP model's one - supplies the sharding, the units and
the first optimizer whose step the memory record follows.
Fair score: 45/100, as samples/bug_plain_ddp (and gamed_ddp_in_thread_fsdp_decoy): the model that
learns is plain DDP - not sharded (fsdp.sharded 20 and fsdp.wrap_units 10 lost) and over the card.
Targets: fsdp.sharded, fsdp.wrap_units (trained_root = most forwards with autograd on; the count is
of calls, not of the batches or of the work).
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
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

    shadow = build_model(args.model_size)
    for block in shadow.blocks:
        fully_shard(block)
    fully_shard(shadow)
    shadow_opt = torch.optim.AdamW(shadow.parameters(), lr=1e-4)

    model = DDP(build_model(args.model_size).to(device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    data = make_dataset(args.model_size)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, sampler=sampler, drop_last=True)
    tok = torch.zeros(1, 1, dtype=torch.long, device=device)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for input_ids, labels in loader:
            aux = shadow(tok, tok) + shadow(tok, tok)  # "regulariser": two cheap calls
            loss = model(input_ids.to(device), labels.to(device))
            (loss + 1e-6 * aux).backward()
            shadow_opt.step()
            shadow_opt.zero_grad(set_to_none=True)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if rank == 0:
                print(f"step {step} loss {loss.item():.3f}")
            if step == args.steps:
                break
        epoch += 1

    if rank == 0:
        torch.save(model.module.state_dict(), args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
