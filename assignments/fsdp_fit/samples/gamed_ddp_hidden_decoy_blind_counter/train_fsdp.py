"""Adapted from the homework-3 attack round (r2a, f5_ddp_hidden_behind_decoy_and_blind_counter.py); the original header follows."""
"""Attack f5 (trick, fsdp_fit; f1 + f3 combined). Plain DDP again - every rank holds the whole model,
its gradients and two Adam moments - but everything about the real model (building it, DDP, forward,
backward, the update) runs inside torch.utils._python_dispatch._disable_current_modes(), so the CPU
memory counter (a TorchDispatchMode) never sees it, and its Adam is written by hand (moments in a
plain dict), so no torch.optim state of it is measured at the step. A fully_shard'ed copy of the
model, run twice per step on one token under autograd with its own AdamW stepped first, is what the
harness calls "the model that trained": its shards, units, states and counted peak are what the
checks read; the contradiction test (peak >= 0.9 x live states) holds because the decoy's states
are all that is measured.
Fair score: 45/100, as samples/bug_plain_ddp: not sharded, no units, does not fit (the real per-rank
memory is about the unsharded model's 16 bytes/parameter plus DDP buckets).
Targets: fsdp.sharded, fsdp.wrap_units, memory.fit (trained root by forward count; states only of
torch.optim optimizers; a dispatch-mode counter the script can pop). Evidence that would catch it:
the job cgroup's peak memory (outside) against the counted peak, which the grader keeps as evidence only.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import _disable_current_modes as quiet
from torch.utils.data import DataLoader, DistributedSampler

from model import SIZES, build_model, make_dataset


class HandAdam:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lr, self.b1, self.b2, self.eps = list(params), lr, betas[0], betas[1], eps
        self.m = {id(p): torch.zeros_like(p) for p in self.params}
        self.v = {id(p): torch.zeros_like(p) for p in self.params}
        self.t = 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        for p in self.params:
            if p.grad is None:
                continue
            m, v = self.m[id(p)], self.v[id(p)]
            m.mul_(self.b1).add_(p.grad, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(p.grad, p.grad, value=1 - self.b2)
            mh, vh = m / (1 - self.b1 ** self.t), v / (1 - self.b2 ** self.t)
            p.addcdiv_(mh, vh.sqrt().add_(self.eps), value=-self.lr)
            p.grad = None


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

    with quiet():
        model = DDP(build_model(args.model_size).to(device))
        optimizer = HandAdam(model.parameters(), lr=args.lr)

    data = make_dataset(args.model_size)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, sampler=sampler, drop_last=True)
    tok = torch.zeros(1, 1, dtype=torch.long, device=device)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for input_ids, labels in loader:
            aux = shadow(tok, tok) + shadow(tok, tok)
            (1e-6 * aux).backward()  # counted: the decoy's gradients are live at the step
            with quiet():
                loss = model(input_ids.to(device), labels.to(device))
                loss.backward()  # last: the loss the harness records is the real model's
            shadow_opt.step()
            shadow_opt.zero_grad(set_to_none=True)
            with quiet():
                optimizer.step()
            step += 1
            if rank == 0:
                print(f"step {step} loss {loss.item():.3f}")
            if step == args.steps:
                break
        epoch += 1

    if rank == 0:
        with quiet():
            torch.save(model.module.state_dict(), args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
