"""CIFAR-10 on several processes: a config dict, a small VGG-style net and a runner with checkpoints."""
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CONFIG = {
    "data": "./data",
    "epochs": 5,
    "per_rank_batch": 64,
    "base_lr": 0.02,
    "eval_batch": 500,
    "channels": [24, 48],
    "ckpt": "checkpoint.pt",
}


def overrides(argv):
    cfg = dict(CONFIG)
    for item in argv:
        key, _, value = item.partition("=")
        if key not in cfg:
            sys.exit(f"unknown option {key}")
        cfg[key] = json.loads(value) if value[:1] in "[{0123456789-" else value
    return cfg


def cifar_arrays(folder, files):
    merged = {"data": [], "labels": []}
    for fname in files:
        blob = np.load(os.path.join(folder, "cifar-10-batches-py", fname), allow_pickle=True, encoding="latin1")
        for key in merged:
            merged[key].append(np.asarray(blob[key]))
    array = np.concatenate(merged["data"]).reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
    return torch.tensor(array), torch.tensor(np.concatenate(merged["labels"]), dtype=torch.long)


def vgg_block(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.MaxPool2d(2)]


class SmallVGG(nn.Module):
    def __init__(self, channels):
        super().__init__()
        layers, cin = [], 3
        for cout in channels:
            layers += vgg_block(cin, cout)
            cin = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x):
        return self.fc(self.pool(self.features(x)).flatten(1))


class Runner:
    """Owns the model, its optimizer and the loaders; saves on rank 0."""

    def __init__(self, model, loaders, device, lr, rank):
        self.rank, self.history = rank, []
        self.model, self.device = model, device
        self.train_loader = loaders["train"]
        self.eval_loader = loaders["test"]
        self.criterion = nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(model.parameters(), lr, 0.9, nesterov=True)

    def one_epoch(self):
        self.model.train()
        seen, summed = 0, torch.zeros(1, device=self.device)
        for images, targets in self.train_loader:
            images, targets = images.to(self.device), targets.to(self.device)
            self.opt.zero_grad()
            loss = self.criterion(self.model(images), targets)
            loss.backward()
            self.opt.step()
            summed += loss.detach() * targets.numel()
            seen += targets.numel()
        return summed.item() / max(seen, 1)

    def evaluate(self):
        self.model.eval()
        right = wrong = 0
        loss_sum = 0.0
        with torch.inference_mode():
            for xb, yb in self.eval_loader:
                out = self.model(xb.to(self.device)).cpu()
                loss_sum += F.cross_entropy(out, yb, reduction="sum").item()
                hits = int((out.argmax(dim=1) == yb).sum())
                right, wrong = right + hits, wrong + len(yb) - hits
        totals = torch.tensor([loss_sum, right, right + wrong], dtype=torch.float64)
        dist.all_reduce(totals)
        return totals[0].item() / totals[2].item(), totals[1].item() / totals[2].item()

    def checkpoint(self, path, epoch):
        if self.rank != 0:
            return
        payload = {"epoch": epoch, "weights": self.model.module.state_dict(), "history": self.history}
        tmp = path + ".tmp"
        torch.save(payload, tmp)
        os.replace(tmp, path)

    def report(self, epoch, train_loss, val):
        self.history.append({"epoch": epoch, "train": train_loss, "val_loss": val[0], "val_acc": val[1]})
        if self.rank == 0:
            print(json.dumps(self.history[-1]), flush=True)


def distributed_env():
    gpu = torch.cuda.is_available()
    dist.init_process_group(backend=os.environ.get("BACKEND", "nccl" if gpu else "gloo"))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if gpu:
        torch.cuda.set_device(local)
    return dist.get_rank(), dist.get_world_size(), torch.device("cuda", local) if gpu else torch.device("cpu")


def make_loaders(cfg, rank, size):
    train_ds = TensorDataset(*cifar_arrays(cfg["data"], [f"data_batch_{i}" for i in range(1, 6)]))
    test_ds = TensorDataset(*cifar_arrays(cfg["data"], ["test_batch"]))
    samplers = {name: DistributedSampler(ds, num_replicas=size, rank=rank, shuffle=name == "train")
                for name, ds in (("train", train_ds), ("test", test_ds))}
    return samplers, {"train": DataLoader(train_ds, cfg["per_rank_batch"], sampler=samplers["train"], drop_last=True),
                      "test": DataLoader(test_ds, cfg["eval_batch"], sampler=samplers["test"])}


def main():
    cfg = overrides(sys.argv[1:])
    rank, size, device = distributed_env()
    torch.manual_seed(7 + rank)
    samplers, loaders = make_loaders(cfg, rank, size)
    net = SmallVGG(cfg["channels"])
    net = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(net).to(device),
              device_ids=None if device.type == "cpu" else [device.index])
    scaled = cfg["base_lr"] * size * cfg["per_rank_batch"] / 64
    runner = Runner(net, loaders, device, scaled, rank)
    epoch = 0
    while epoch < cfg["epochs"]:
        samplers["train"].set_epoch(epoch)
        runner.report(epoch, runner.one_epoch(), runner.evaluate())
        runner.checkpoint(cfg["ckpt"], epoch)
        epoch += 1
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
