"""Sample (false-fail probe): FSDP1 FULL_SHARD, one unit per Block, saved with torch.distributed.checkpoint from
StateDictType.SHARDED_STATE_DICT: the .metadata names the original parameters (FSDP1 trains flat parameters),
which must match the model that trained. Full marks."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import ShardingStrategy, StateDictType
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

    import torch.distributed.checkpoint as dcp
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        dcp.save({"model": model.state_dict()}, checkpoint_id=args.save + ".dcp")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
