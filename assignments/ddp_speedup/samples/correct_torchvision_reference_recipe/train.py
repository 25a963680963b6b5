"""Correct sample adapted from pytorch/vision, references/classification/train.py and utils.py
(BSD-3-Clause, read at commits 017e9b9 and 041fe3b). The structure is the public recipe's:
``init_distributed_mode`` from RANK/WORLD_SIZE/LOCAL_RANK, then ``setup_for_distributed``
replacing ``builtins.print`` so that only rank 0 prints; a ``MetricLogger`` whose ``log_every``
wraps the loader and whose meters are all-reduced (``barrier`` + ``all_reduce`` of float64
totals) after evaluation; the forward pass *before* ``optimizer.zero_grad()``; two parameter
groups (normalisation parameters without weight decay); label smoothing; SGD with Nesterov
momentum; a linear warm-up chained to cosine annealing by ``SequentialLR``; an exponential moving
average of the weights (``AveragedModel``) updated every few steps and evaluated too; a
``DistributedSampler`` for the training set and one with ``shuffle=False`` for the test set;
``set_epoch``; ``save_on_master`` of ``model_{epoch}.pth`` and ``checkpoint.pth`` every epoch.

Changed for this homework (marked ``# changed``): the homework's CNN instead of a torchvision
ResNet and CIFAR-10 through ``torchvision.datasets.CIFAR10(download=False)`` with a crop, a flip and
``Normalize`` instead of ImageFolder presets; SyncBatchNorm on by default (the recipe's
``--sync-bn`` is off by default, which the homework would rightly fail); gloo and the CPU without a
GPU (the meters' all-reduce used ``device='cuda'``); no AMP, mixup, caching or resume options.
"""
import argparse
import os
import time
from collections import defaultdict, deque

import torch
import torch.distributed as dist
import torchvision
import torchvision.transforms as T
from torch import nn


class SmoothedValue:
    def __init__(self, window_size=20):
        self.deque, self.total, self.count = deque(maxlen=window_size), 0.0, 0

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    def synchronize_between_processes(self, device):
        if not (dist.is_available() and dist.is_initialized()):
            return
        t = torch.tensor([self.count, self.total], dtype=torch.float64, device=device)  # changed: not always cuda
        dist.barrier()
        dist.all_reduce(t)
        self.count, self.total = int(t[0].item()), t[1].item()

    @property
    def global_avg(self):
        return self.total / max(self.count, 1)


class MetricLogger:
    def __init__(self, delimiter="  "):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            self.meters[k].update(v.item() if isinstance(v, torch.Tensor) else v)

    def __str__(self):
        return self.delimiter.join(f"{k}: {m.global_avg:.4f}" for k, m in self.meters.items())

    def synchronize_between_processes(self, device):
        for meter in self.meters.values():
            meter.synchronize_between_processes(device)

    def log_every(self, iterable, print_freq, header):
        start = time.time()
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0:
                print(f"{header} [{i}/{len(iterable)}]  {self}")
        print(f"{header} Total time: {time.time() - start:.1f}s")


def setup_for_distributed(is_master):
    import builtins
    builtin_print = builtins.print

    def print(*args, **kwargs):
        force = kwargs.pop("force", False)
        if is_master or force:
            builtin_print(*args, **kwargs)

    builtins.print = print


def init_distributed_mode(args):
    args.rank, args.world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    args.gpu = int(os.environ["LOCAL_RANK"])
    args.distributed = True
    args.dist_backend = "nccl" if torch.cuda.is_available() else "gloo"  # changed
    if torch.cuda.is_available():
        torch.cuda.set_device(args.gpu)
    print(f"| distributed init (rank {args.rank}): env://", flush=True)
    dist.init_process_group(backend=args.dist_backend, init_method="env://", world_size=args.world_size, rank=args.rank)
    setup_for_distributed(args.rank == 0)


def save_on_master(*args, **kwargs):
    if dist.get_rank() == 0:
        torch.save(*args, **kwargs)


def accuracy(output, target):
    with torch.no_grad():
        return (output.argmax(1) == target).float().mean() * 100.0


def train_one_epoch(model, criterion, optimizer, loader, device, epoch, args, model_ema):
    model.train()
    logger = MetricLogger()
    for i, (image, target) in enumerate(logger.log_every(loader, args.print_freq, f"Epoch: [{epoch}]")):
        image, target = image.to(device), target.to(device)
        output = model(image)
        optimizer.zero_grad()
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        if model_ema is not None and i % args.model_ema_steps == 0:
            model_ema.update_parameters(model)
        logger.update(loss=loss.item(), lr=optimizer.param_groups[0]["lr"], acc1=accuracy(output, target))


def evaluate(model, criterion, loader, device, log_suffix=""):
    model.eval()
    logger = MetricLogger()
    with torch.inference_mode():
        for image, target in logger.log_every(loader, 100, f"Test: {log_suffix}"):
            image, target = image.to(device), target.to(device)
            output = model(image)
            logger.update(loss=criterion(output, target), acc1=accuracy(output, target))
    logger.synchronize_between_processes(device)
    print(f"Test: {log_suffix} Acc@1 {logger.meters['acc1'].global_avg:.3f}")


def make_model():  # changed: the homework's CNN
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def main(args):
    init_distributed_mode(args)
    print(args)
    device = torch.device("cuda", args.gpu) if torch.cuda.is_available() else torch.device("cpu")
    mean, std = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)
    train_tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(mean, std)])
    test_tf = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    dataset = torchvision.datasets.CIFAR10(args.data_dir, train=True, download=False, transform=train_tf)
    dataset_test = torchvision.datasets.CIFAR10(args.data_dir, train=False, download=False, transform=test_tf)
    train_sampler = torch.utils.data.distributed.DistributedSampler(dataset)
    test_sampler = torch.utils.data.distributed.DistributedSampler(dataset_test, shuffle=False)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=train_sampler,
                                         num_workers=args.workers)
    loader_test = torch.utils.data.DataLoader(dataset_test, batch_size=args.batch_size, sampler=test_sampler,
                                              num_workers=args.workers)

    torch.manual_seed(0)
    model = make_model().to(device)
    if args.distributed and args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    norm = [p for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) for p in m.parameters()]
    other = [p for p in model.parameters() if all(p is not q for q in norm)]
    groups = [{"params": norm, "weight_decay": 0.0}, {"params": other, "weight_decay": args.weight_decay}]
    optimizer = torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, nesterov=True)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, args.epochs - 1))
    lr_scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[1])

    ids = [args.gpu] if device.type == "cuda" else None
    model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    model_without_ddp = model.module
    model_ema = torch.optim.swa_utils.AveragedModel(
        model_without_ddp, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.99))

    print("Start training")
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        train_one_epoch(model, criterion, optimizer, loader, device, epoch, args, model_ema)
        lr_scheduler.step()
        evaluate(model, criterion, loader_test, device)
        evaluate(model_ema, criterion, loader_test, device, log_suffix="EMA")
        checkpoint = {"model": model_without_ddp.state_dict(), "optimizer": optimizer.state_dict(),
                      "lr_scheduler": lr_scheduler.state_dict(), "epoch": epoch, "model_ema": model_ema.state_dict()}
        save_on_master(checkpoint, os.path.join(args.output_dir, f"model_{epoch}.pth"))
        save_on_master(checkpoint, os.path.join(args.output_dir, "checkpoint.pth"))
    dist.destroy_process_group()


def get_args_parser():
    parser = argparse.ArgumentParser(description="PyTorch Classification Training")
    parser.add_argument("--data-dir", default="./data")  # changed: the homework's option name
    parser.add_argument("-b", "--batch-size", default=64, type=int)
    parser.add_argument("--epochs", default=5, type=int)
    parser.add_argument("-j", "--workers", default=2, type=int)
    parser.add_argument("--lr", default=0.05, type=float)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--wd", "--weight-decay", default=5e-4, type=float, dest="weight_decay")
    parser.add_argument("--label-smoothing", default=0.1, type=float)
    parser.add_argument("--print-freq", default=10, type=int)
    parser.add_argument("--output-dir", default=".")
    parser.add_argument("--no-sync-bn", dest="sync_bn", action="store_false")  # changed: on by default
    parser.add_argument("--model-ema-steps", default=4, type=int)
    return parser


if __name__ == "__main__":
    main(get_args_parser().parse_args())
