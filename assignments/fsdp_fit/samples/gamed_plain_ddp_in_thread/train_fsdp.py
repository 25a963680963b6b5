"""Gamed: plain DDP (bug_plain_ddp) trained in a threading.Thread, nothing else: a dispatch mode is
thread-local, so a CPU peak counter entered only in the main thread sees none of the training
("peaked at 0 B" beside the states listed for the same step). Every rank keeps the whole model,
gradients and Adam states: it must not pass memory.fit."""
import argparse
import os
import threading

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from model import SIZES, build_model, make_dataset


def train(args, model, device, rank):
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

    model = DDP(build_model(args.model_size))
    worker = threading.Thread(target=train, args=(args, model, device, rank))
    worker.start()
    worker.join()

    if rank == 0:
        torch.save(model.module.state_dict(), args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
