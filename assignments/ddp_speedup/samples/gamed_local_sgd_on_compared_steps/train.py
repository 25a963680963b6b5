"""Attack sample: local SGD that averages the model only on the steps the grader compares.

The harness's compared steps are public (1, 2, 4, 8, ... and every 100th). DDP's comm hook here
returns each rank's own gradient without communicating, except on those steps; before them (and at
the end) the parameters are averaged, so they are equal after each compared step. Every compared digest matches, DDP's hook fires
every step, and the ranks move a fraction of the bytes gradient sync moves. Must lose ddp.grad_sync.
"""

import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def load_cifar(data_dir):
    folder = os.path.join(data_dir, "cifar-10-batches-py")
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}"), "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        xs.append(batch[b"data"])
        ys.extend(batch[b"labels"])
    x = torch.from_numpy(np.concatenate(xs)).float().div_(255).view(-1, 3, 32, 32)
    return TensorDataset(x, torch.tensor(ys))


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def compared(step):
    return step & (step - 1) == 0 or step % 100 == 0


def sometimes(state, bucket):
    """DDP's comm hook: an all-reduce on the compared steps, each rank's own gradient on the others."""
    if compared(state["step"]):
        buf = bucket.buffer().div_(dist.get_world_size())
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def average(model, world):
    with torch.no_grad():
        for p in model.parameters():
            dist.all_reduce(p.data)
            p.data.div_(world)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=0.02, help="for a global batch of 64")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    lr = args.lr * args.batch_size * world / 64
    loss_fn = nn.CrossEntropyLoss()

    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    state = {"step": 0}
    model.register_comm_hook(state, sometimes)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)  # no momentum: its buffers would differ

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            state["step"] += 1
            if compared(state["step"]):  # equal parameters, then an equal update: equal after this step
                average(model, world)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")

    average(model, world)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
