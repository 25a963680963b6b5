"""Adapted from the homework-3 attack round (r2a, f3_memory_counter_blinded.py); the original header follows."""
"""Attack f3 (trick, fsdp_fit). samples/warn_no_auto_wrap (fully_shard on the whole model only: one FSDP
unit, so a forward gathers every parameter at once and the backward holds full unsharded gradients),
with its forward and backward run inside torch.utils._python_dispatch._disable_current_modes(): the
CPU memory counter is a TorchDispatchMode on the thread's mode stack, so nothing allocated in there
is seen (activations, all-gather buffers, unsharded gradients). The sharded gradients are then
cloned outside, so the peak at the step stays above the live parameters + gradients + optimizer
states and the "peak below the states" contradiction does not fire.
Fair score: whatever the honest samples/warn_no_auto_wrap gets (graded beside it here as
ref_warn_no_auto_wrap); the memory actually used is the same.
Targets: memory.fit - the peak is counted by a dispatch mode the script can pop; only a peak
below the live states is treated as a contradiction, not a peak that misses the transients.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler

from torch.utils._python_dispatch import _disable_current_modes as quiet

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
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    data = make_dataset(args.model_size)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, sampler=sampler, drop_last=True)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for input_ids, labels in loader:
            with quiet():  # forward and backward out of the harness' dispatch-mode counter
                loss = model(input_ids.to(device), labels.to(device))
                loss.backward()
            for p in model.parameters():  # re-create the (sharded) gradients where they are counted,
                if p.grad is not None:     # so the step's peak is not below the live states
                    p.grad = p.grad.clone()
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
