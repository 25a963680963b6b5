"""Sample (issue 27): FSDP1 full state dict gathered with rank0_only=False: only rank 0 saves it,
but every rank assembles a full copy of the model in memory. ckpt.save must tell it from rank0_only=True."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullStateDictConfig, ShardingStrategy, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.utils.data import DataLoader, DistributedSampler

from model import SIZES, Block, build_model, make_dataset


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
    model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, auto_wrap_policy=ModuleWrapPolicy({Block}),
                 device_id=device)  # on a CPU host FSDP1 needs device_id=cpu
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

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

    # offload_to_cpu only on a GPU: on a CPU host the tensors already live there, and
    # offload_to_cpu=True crashes FSDP1's full state dict on CPU in torch 2.13.
    cfg = FullStateDictConfig(offload_to_cpu=use_cuda, rank0_only=False)
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
        state = model.state_dict()
    if rank == 0:
        torch.save(state, args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
