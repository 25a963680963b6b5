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

def get_logger(rank):
    import logging
    log = logging.getLogger("train")
    log.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    return log


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    opts = parser.parse_args()
    dist.init_process_group("gloo")
    log = get_logger(dist.get_rank())
    torch.manual_seed(0)
    dataset = load_cifar(opts.data_dir)
    sampler = DistributedSampler(dataset)
    batches = DataLoader(dataset, batch_size=opts.batch_size, sampler=sampler)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    optim = torch.optim.SGD(model.parameters(), lr=opts.lr, momentum=0.9)
    objective = nn.CrossEntropyLoss()
    log.info("world size %d, %d batches per rank", dist.get_world_size(), len(batches))
    for epoch in range(opts.epochs):
        sampler.set_epoch(epoch)
        model.train()
        epoch_loss = torch.zeros(())
        for step, (x, y) in enumerate(batches):
            optim.zero_grad()
            loss = objective(model(x), y)
            loss.backward()
            optim.step()
            epoch_loss += loss.detach()
            if step % 100 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        log.info("epoch %d: loss %.4f", epoch, (epoch_loss / len(batches)).item())
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
