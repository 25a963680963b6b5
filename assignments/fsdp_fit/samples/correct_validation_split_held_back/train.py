"""A correct FSDP2 script in a common style: a tenth of the data is held back for validation with random_split
(one seeded generator, the same split on every rank), a DistributedSampler over the training part, and the
validation loss measured without gradients every few steps and at the end. Under grading the data set holds one
epoch of the run, so the training part is a little shorter than that epoch: the sampler pads it with a repeated
sample, and each rank's epoch ends before the run does."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, random_split

from model import SIZES, build_model, make_dataset


@torch.no_grad()
def validate(model, loader, device) -> float:
    losses = [float(model(x.to(device), y.to(device))) for x, y in loader]
    return sum(losses) / max(len(losses), 1)


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
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    data = make_dataset(args.model_size)
    n_val = max(1, len(data) // 10)
    train, val = random_split(data, [len(data) - n_val, n_val], generator=torch.Generator().manual_seed(42))
    batch = SIZES[args.model_size].batch_size
    sampler = DistributedSampler(train, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=batch, sampler=sampler)
    val_loader = DataLoader(val, batch_size=batch)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        model.train()
        for input_ids, labels in loader:
            loss = model(input_ids.to(device), labels.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % 5 == 0 or step == args.steps:
                model.eval()
                val_loss = validate(model, val_loader, device)
                model.train()
                if rank == 0:
                    print(f"step {step} train {loss.item():.3f} val {val_loss:.3f}")
            if step == args.steps:
                break
        epoch += 1

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        torch.save(state, args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
