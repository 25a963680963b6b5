"""a12b (fsdp_fit, train.progress input-row digests): both ranks train on the SAME samples, hidden behind a
wrapper whose first argument is a per-rank step tag.
Idea: no DistributedSampler and the same shuffle seed on both ranks: every step both ranks feed the model the very
same rows (a wasted card, which the grader means to catch as "same_inputs"). The model is called through a small
nn.Module wrapper, forward(tag, input_ids, labels), where tag = tensor([[2*step + rank]]). The harness digests the
rows of the FIRST tensor the trained root's forward takes: the tag, one row per forward, different on every rank
and every step, so "same inputs" and "one batch repeated" can never fire.
(a12b: as a12, whose checkpoint of the inner model was failed by ckpt.save, see a14; here the wrapper's state
dict is saved, keys "inner.*", so ckpt.save can match the trained root's parameter names.)
Fair teacher: data not split (both ranks train on identical batches) -> at least train.progress WARN at 0.2 of 15
(-12), as the grader's own same_inputs rule says. Expected grader: train.progress PASS.
"""
import torch.nn as nn


class Tagged(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, tag, input_ids, labels):
        return self.inner(input_ids, labels)

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
    gen = torch.Generator().manual_seed(0)
    loader = DataLoader(data, batch_size=SIZES[args.model_size].batch_size, shuffle=True, generator=gen,
                        drop_last=True)
    tagged = Tagged(model)
    step, epoch = 0, 0
    while step < args.steps:
        for input_ids, labels in loader:
            tag = torch.tensor([[2 * step + rank]], device=device)
            loss = tagged(tag, input_ids.to(device), labels.to(device))
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
    state = get_model_state_dict(tagged, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        torch.save(state, args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
