"""Distributed CIFAR-10: process-group helpers in the style of the PyTorch DDP tutorial, the meter,
top-k accuracy and checkpoint helpers of the ImageNet example, my own model and schedule."""
import os
import pickle
import shutil
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn, optim
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def setup():
    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))


def cleanup():
    dist.destroy_process_group()


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self, name, fmt=":f"):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "model_best.pth.tar")


class Cifar(Dataset):
    def __init__(self, root):
        self.items, self.targets = [], []
        for i in range(1, 6):
            with open(f"{root}/cifar-10-batches-py/data_batch_{i}", "rb") as fp:
                raw = pickle.load(fp, encoding="latin1")
            self.items.append(torch.tensor(raw["data"], dtype=torch.uint8))
            self.targets.extend(raw["labels"])
        self.items = torch.cat(self.items).view(-1, 3, 32, 32)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return self.items[i].float().div(255).sub(0.5), self.targets[i]


class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 48, 5, padding=2)
        self.n1 = nn.BatchNorm2d(48)
        self.c2 = nn.Conv2d(48, 96, 5, padding=2)
        self.n2 = nn.BatchNorm2d(96)
        self.fc = nn.Linear(96 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.n1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.n2(self.c2(x))), 2)
        return self.fc(x.flatten(1))


def run(epochs=5, per_gpu=64, lr=0.02, root="./data"):
    setup()
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if torch.cuda.is_available() else "cpu")
    data = Cifar(root)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True)
    loader = DataLoader(data, batch_size=per_gpu, sampler=sampler, num_workers=2)
    model = DistributedDataParallel(nn.SyncBatchNorm.convert_sync_batchnorm(Wide()).to(dev))
    opt = optim.Adam(model.parameters(), lr=lr * world * per_gpu / 64 / 20)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    best = 0.0
    for ep in range(epochs):
        sampler.set_epoch(ep)
        model.train()
        meter, acc_meter = AverageMeter("loss", ":.3f"), AverageMeter("acc", ":.1f")
        for x, y in loader:
            x, y = x.to(dev), y.to(dev)
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            meter.update(loss.item(), len(y))
            acc_meter.update(accuracy(logits, y)[0].item(), len(y))
        sched.step()
        if rank == 0:
            print(f"[{ep}] {meter} {acc_meter}")
            save_checkpoint({"epoch": ep, "model": model.module.state_dict()}, acc_meter.avg > best)
            best = max(best, acc_meter.avg)
    cleanup()


if __name__ == "__main__":
    run(*(int(a) for a in sys.argv[1:2]))
