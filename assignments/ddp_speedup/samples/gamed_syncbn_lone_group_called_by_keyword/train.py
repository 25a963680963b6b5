"""Sample (attack round 6, written blind from the grader's code): SyncBatchNorm's group swapped to one rank after
the first step, each layer called as layer(input=x). A BatchNorm forward is counted by what it normalised with
however its input is passed, so ddp.syncbn must warn, as for bug_syncbn_group_swapped_after_first_step.

The attacker's note:
a17 (ddp_speedup, ddp.syncbn bn_calls): SyncBatchNorm's group swapped to a lone group after step 1, layers
called with a keyword argument.
Idea: the README says a SyncBatchNorm whose process_group is swapped once training began for a group short of every
rank "is seen" (bn_calls counts each BatchNorm forward in training by the group it spans). After the first optimizer
step every SyncBatchNorm gets process_group = a new group holding only this rank (per-rank statistics, i.e. plain
BatchNorm). The Sequential's forward calls each layer as layer(input=x): a global forward pre-hook receives only
the positional args, which are empty, so the counting hook returns before it counts anything.
(First try with layer(input=x) crashed: the grader's CPU SyncBatchNorm forward is forward(x), not forward(input);
the keyword is now read from each layer's signature. That crash is itself a small false fail: a correct script
calling SyncBatchNorm(input=x) runs on a GPU but raises TypeError under the CPU grader.)
Fair teacher: BatchNorm not synchronised in training -> ddp.syncbn WARN/0 (-5). Expected grader: PASS.
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
    net = model
    lone = [dist.new_group([r]) for r in range(dist.get_world_size())]

    import inspect
    names = [next(iter(inspect.signature(layer.forward).parameters)) for layer in net]

    def keyword_forward(x):
        for layer, name in zip(net, names):
            x = layer(**{name: x})
        return x
    model.forward = keyword_forward
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    lr = args.lr * args.batch_size * world / 64  # scale with the global batch
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
            for m in net.modules():
                if isinstance(m, nn.SyncBatchNorm):
                    m.process_group = lone[rank]  # "local statistics are fine after warm-up"
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
