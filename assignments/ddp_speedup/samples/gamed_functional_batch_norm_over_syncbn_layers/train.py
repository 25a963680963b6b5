"""Sample (attack round 6, written blind from the grader's code): converted layers that are never called; a
hand-written forward runs F.batch_norm with training=True on their weights and buffers. A batch_norm call in
training outside a BatchNorm layer's own forward normalises with this rank's statistics alone: ddp.syncbn must warn.

The attacker's note:
a1 (ddp_speedup, ddp.syncbn): SyncBatchNorm in name only.
Idea: the model is converted with convert_sync_batchnorm (so the wrap-time and first-step "norms" census sees
only SyncBatchNorm), but the Sequential's forward is replaced by a hand-written loop that, for every
SyncBatchNorm layer, calls F.batch_norm on the layer's own weight/bias/running buffers with training=True:
each rank normalises with its OWN batch statistics (plain per-rank BatchNorm), and the layer module itself is
never called, so the bn_calls counter (a forward pre-hook on _BatchNorm modules) counts nothing.
Fair teacher: everything else is the reference, but BatchNorm is not synchronised -> ddp.syncbn WARN/0 (-5), i.e.
85/90 in fast mode. Expected grader: ddp.syncbn PASS (the census says SyncBN, bn_calls is [0,0,0]), 90/90.
"""
import torch.nn.functional as F

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

    def fused_forward(x, _net=model):  # "fused" loop: BN applied functionally
        for layer in _net:
            if isinstance(layer, nn.SyncBatchNorm):
                x = F.batch_norm(x, layer.running_mean, layer.running_var, layer.weight, layer.bias,
                                 _net.training, layer.momentum, layer.eps)
            else:
                x = layer(x)
        return x
    model.forward = fused_forward
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
            total += loss.item() * len(y)
            count += len(y)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / count:.4f}")
            torch.save(model.module.state_dict(), "checkpoint.pt")

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
