"""a3 (ddp_speedup, ddp.grad_sync): a DDP comm hook that broadcasts rank 0's gradients.
Idea: register_comm_hook with a hook that replaces every bucket by rank 0's (dist.broadcast from 0): all ranks
apply rank 0's local gradient, rank 1's work is thrown away. Under DDP the harness reads the "local" gradient
(gl) after backward, i.e. after the hook, so gl == ga on every rank and the contribution verdict is "equal", never
"discarded"; the bucket norms (gn) are read before the hook, so rank 1 is not "idle"; parameters are equal every
step; the broadcast moves half a ring all-reduce's bytes (> the 35% traffic floor), and a broadcast adds nothing to
the "ar" bytes so the hook lowers no floor. README: "broadcasting rank 0's gradients ... does not [count]".
(First try with the reference lr*world: the grad_sync verdict passed, "equal" at all 240 steps, but rank 0's
lone gradient at the doubled lr did not learn -> model floor; the lr is therefore not scaled by world.)
Fair teacher: gradients not synchronised -> ddp.grad_sync 0 (-15, and its moved points). Expected grader: PASS.
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=0.02, help="for a global batch of 64")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)

    dataset = load_cifar(args.data_dir)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model()).to(device)
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)

    def broadcast_hook(state, bucket):  # "cheaper than all-reduce": one broadcast per bucket
        buf = bucket.buffer()
        fut = dist.broadcast(buf, src=0, async_op=True).get_future()
        return fut.then(lambda f: buf)
    model.register_comm_hook(None, broadcast_hook)
    lr = args.lr * args.batch_size / 64  # one rank's gradient is applied: no scaling with the world
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
