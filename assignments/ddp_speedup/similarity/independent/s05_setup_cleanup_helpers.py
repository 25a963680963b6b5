import argparse
import os
import pickle

import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler
from torch.utils.data import DataLoader, TensorDataset


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

def setup():
    dist.init_process_group(backend="gloo", init_method="env://")
    return dist.get_rank(), dist.get_world_size()


def cleanup():
    dist.destroy_process_group()


def is_main(rank):
    return rank == 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()
    rank, world = setup()
    torch.manual_seed(42)
    train = load_cifar(args.data_dir)
    sampler = DistributedSampler(train, rank=rank, num_replicas=world)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, pin_memory=False)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * world, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        correct = seen = 0
        for images, labels in loader:
            logits = model(images)
            loss = loss_fn(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(dim=1) == labels).sum().item()
            seen += labels.size(0)
        if is_main(rank):
            print("epoch %d: loss %.4f, train acc %.3f" % (epoch, loss.item(), correct / seen))
            torch.save({"epoch": epoch, "model": model.module.state_dict()}, "checkpoint.pt")
    cleanup()


if __name__ == "__main__":
    main()
