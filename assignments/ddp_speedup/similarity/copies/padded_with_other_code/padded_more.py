"""CIFAR-10 with DDP plus my experiment toolkit (augmentation, metrics, curves, profiling)."""
import argparse
import math
import os
import pickle
import time
import platform
import random
import statistics
from collections import defaultdict

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset


def read_batches(root, names):
    images, labels = [], []
    for name in names:
        with open(os.path.join(root, "cifar-10-batches-py", name), "rb") as fh:
            entry = pickle.load(fh, encoding="bytes")
        images.append(entry[b"data"])
        labels += list(entry[b"labels"])
    pixels = torch.from_numpy(np.concatenate(images)).float().div_(255).view(-1, 3, 32, 32)
    mean = pixels.mean(dim=(0, 2, 3), keepdim=True)
    std = pixels.std(dim=(0, 2, 3), keepdim=True)
    return TensorDataset((pixels - mean) / std, torch.tensor(labels))


# ---------------------------------------------------------------- augmentation
def random_crop(batch, pad=4, generator=None):
    n, c, h, w = batch.shape
    padded = torch.nn.functional.pad(batch, (pad, pad, pad, pad), mode="reflect")
    tops = torch.randint(0, 2 * pad + 1, (n,), generator=generator)
    lefts = torch.randint(0, 2 * pad + 1, (n,), generator=generator)
    out = torch.empty_like(batch)
    for i in range(n):
        out[i] = padded[i, :, tops[i]:tops[i] + h, lefts[i]:lefts[i] + w]
    return out


def random_flip(batch, p=0.5, generator=None):
    mask = torch.rand(batch.shape[0], generator=generator) < p
    batch = batch.clone()
    batch[mask] = batch[mask].flip(-1)
    return batch


def cutout(batch, size=8, generator=None):
    n, _, h, w = batch.shape
    ys = torch.randint(0, h, (n,), generator=generator)
    xs = torch.randint(0, w, (n,), generator=generator)
    for i in range(n):
        y0, y1 = max(0, ys[i] - size // 2), min(h, ys[i] + size // 2)
        x0, x1 = max(0, xs[i] - size // 2), min(w, xs[i] + size // 2)
        batch[i, :, y0:y1, x0:x1] = 0.0
    return batch


class Augment:
    def __init__(self, crop=True, flip=True, holes=False, seed=0):
        self.crop, self.flip, self.holes = crop, flip, holes
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, batch):
        if self.crop:
            batch = random_crop(batch, generator=self.generator)
        if self.flip:
            batch = random_flip(batch, generator=self.generator)
        if self.holes:
            batch = cutout(batch, generator=self.generator)
        return batch


# ---------------------------------------------------------------- metrics
def confusion_matrix(preds, labels, classes=10):
    matrix = torch.zeros(classes, classes, dtype=torch.long)
    for p, t in zip(preds.tolist(), labels.tolist()):
        matrix[t, p] += 1
    return matrix


def per_class_accuracy(matrix):
    totals = matrix.sum(dim=1).clamp(min=1)
    return (matrix.diag().float() / totals.float()).tolist()


def macro_f1(matrix):
    scores = []
    for k in range(matrix.shape[0]):
        tp = matrix[k, k].item()
        fp = matrix[:, k].sum().item() - tp
        fn = matrix[k, :].sum().item() - tp
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        scores.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return sum(scores) / len(scores)


CLASS_NAMES = ["plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def describe_classes(accs):
    ranked = sorted(zip(CLASS_NAMES, accs), key=lambda kv: kv[1])
    worst = ", ".join(f"{name}={acc:.2f}" for name, acc in ranked[:3])
    best = ", ".join(f"{name}={acc:.2f}" for name, acc in ranked[-3:])
    return f"hardest: {worst}; easiest: {best}"


# ---------------------------------------------------------------- curves and profiling
def sparkline(values, width=40):
    marks = " .:-=+*#%@"
    if not values:
        return ""
    lo, hi = min(values), max(values)
    step = max(1, len(values) // width)
    picked = values[::step][:width]
    span = (hi - lo) or 1.0
    return "".join(marks[min(len(marks) - 1, int((v - lo) / span * (len(marks) - 1)))] for v in picked)


class Stopwatch:
    def __init__(self):
        self.laps = defaultdict(list)
        self.mark = None
        self.name = None

    def start(self, name):
        self.stop()
        self.name, self.mark = name, time.perf_counter()

    def stop(self):
        if self.name is not None:
            self.laps[self.name].append(time.perf_counter() - self.mark)
            self.name = None

    def summary(self):
        rows = []
        for name, laps in sorted(self.laps.items()):
            med = statistics.median(laps)
            rows.append(f"{name:>10}: n={len(laps):3d} median={med * 1000:8.1f} ms total={sum(laps):7.2f} s")
        return "\n".join(rows)


def grad_norm(model):
    total = 0.0
    for param in model.parameters():
        if param.grad is not None:
            total += param.grad.detach().float().norm().item() ** 2
    return total ** 0.5


def environment_report():
    lines = [f"python {platform.python_version()} on {platform.system()} {platform.machine()}",
             f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}",
             f"threads: {torch.get_num_threads()}"]
    if dist.is_initialized():
        lines.append(f"backend {dist.get_backend()}, world {dist.get_world_size()}")
    for key in ("MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        if key in os.environ:
            lines.append(f"{key}={os.environ[key]}")
    return "\n".join(lines)


def lr_range_test(model_fn, loader, device, start=1e-4, end=1.0, steps=30):
    model = model_fn().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=start, momentum=0.9)
    factor = (end / start) ** (1 / max(1, steps - 1))
    found, lr, smooth = [], start, None
    for step, (xb, yb) in enumerate(loader):
        if step >= steps:
            break
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        opt.step()
        smooth = loss.item() if smooth is None else 0.9 * smooth + 0.1 * loss.item()
        found.append((lr, smooth))
        if smooth > 4 * min(v for _, v in found):
            break
        lr *= factor
    best = min(found, key=lambda kv: kv[1])[0] if found else start
    return best / 10, found


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)



# ---------------------------------------------------------------- regularisers
def mixup(images, targets, alpha=0.2, classes=10):
    lam = float(np.random.beta(alpha, alpha)) if alpha > 0 else 1.0
    perm = torch.randperm(images.shape[0])
    onehot = torch.nn.functional.one_hot(targets, classes).float()
    return lam * images + (1 - lam) * images[perm], lam * onehot + (1 - lam) * onehot[perm]


def cutmix(images, targets, alpha=1.0, classes=10):
    lam = float(np.random.beta(alpha, alpha))
    perm = torch.randperm(images.shape[0])
    h, w = images.shape[-2:]
    ch, cw = int(h * math.sqrt(1 - lam)), int(w * math.sqrt(1 - lam))
    cy, cx = random.randrange(h), random.randrange(w)
    y0, y1 = max(cy - ch // 2, 0), min(cy + ch // 2, h)
    x0, x1 = max(cx - cw // 2, 0), min(cx + cw // 2, w)
    mixed = images.clone()
    mixed[:, :, y0:y1, x0:x1] = images[perm, :, y0:y1, x0:x1]
    kept = 1 - (y1 - y0) * (x1 - x0) / (h * w)
    onehot = torch.nn.functional.one_hot(targets, classes).float()
    return mixed, kept * onehot + (1 - kept) * onehot[perm]


def soft_cross_entropy(logits, soft_targets):
    return -(soft_targets * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


class WeightEMA:
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items() if v.dtype.is_floating_point}

    def update(self, model):
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if k in self.shadow:
                    self.shadow[k].mul_(self.decay).add_(v.detach(), alpha=1 - self.decay)

    def copy_to(self, model):
        state = model.state_dict()
        state.update(self.shadow)
        model.load_state_dict(state)


# ---------------------------------------------------------------- bookkeeping
def model_table(model):
    rows, total = [], 0
    for name, param in model.named_parameters():
        total += param.numel()
        rows.append(f"{name:<40} {str(tuple(param.shape)):<20} {param.numel():>10,}")
    rows.append(f"{'total':<40} {'':<20} {total:>10,}")
    return "\n".join(rows)


def dataset_stats(dataset, limit=5000):
    xs = torch.stack([dataset[i][0] for i in range(min(limit, len(dataset)))])
    ys = torch.tensor([int(dataset[i][1]) for i in range(min(limit, len(dataset)))])
    counts = torch.bincount(ys, minlength=10).tolist()
    return {"mean": xs.mean(dim=(0, 2, 3)).tolist(), "std": xs.std(dim=(0, 2, 3)).tolist(), "counts": counts}


class JsonLines:
    def __init__(self, path, keep=3, max_bytes=1 << 20):
        self.path, self.keep, self.max_bytes = path, keep, max_bytes

    def rotate(self):
        for n in range(self.keep - 1, 0, -1):
            older, newer = f"{self.path}.{n}", f"{self.path}.{n + 1}" if n + 1 <= self.keep else None
            if os.path.exists(older) and newer:
                os.replace(older, newer)
        if os.path.exists(self.path):
            os.replace(self.path, f"{self.path}.1")

    def write(self, **record):
        if os.path.exists(self.path) and os.path.getsize(self.path) > self.max_bytes:
            self.rotate()
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(repr(sorted(record.items())) + "\n")


def parse_schedule(text):
    """'0:0.1,3:0.01,6:0.001' -> [(0, 0.1), (3, 0.01), (6, 0.001)]"""
    steps = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        epoch, _, value = part.partition(":")
        steps.append((int(epoch), float(value)))
    return sorted(steps)


def lr_at(schedule, epoch):
    value = schedule[0][1] if schedule else 0.0
    for start, lr in schedule:
        if epoch >= start:
            value = lr
    return value



def validate_args(args):
    problems = []
    if args.epochs <= 0:
        problems.append("epochs must be positive")
    if args.batch_size <= 0 or args.batch_size & (args.batch_size - 1):
        problems.append("batch size should be a positive power of two")
    if not 0 < args.lr < 1:
        problems.append("learning rate outside (0, 1)")
    if args.patience < 1:
        problems.append("patience below one epoch stops at once")
    if not os.path.isdir(os.path.join(args.data_dir, "cifar-10-batches-py")):
        problems.append(f"no CIFAR-10 under {args.data_dir}")
    return problems


def topk_hits(logits, targets, ks=(1, 5)):
    ranked = logits.argsort(dim=1, descending=True)
    hits = {}
    for k in ks:
        hits[k] = (ranked[:, :k] == targets.unsqueeze(1)).any(dim=1).float().mean().item()
    return hits


def calibration_error(probs, targets, bins=15):
    confidence, predicted = probs.max(dim=1)
    correct = predicted.eq(targets).float()
    edges = torch.linspace(0, 1, bins + 1)
    error = torch.zeros(())
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (confidence > lo) & (confidence <= hi)
        if inside.any():
            error += inside.float().mean() * (confidence[inside].mean() - correct[inside].mean()).abs()
    return error.item()


def worst_examples(logits, targets, count=8):
    losses = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    order = losses.argsort(descending=True)[:count]
    return [(int(i), CLASS_NAMES[int(targets[i])], CLASS_NAMES[int(logits[i].argmax())], float(losses[i]))
            for i in order]


def split_holdout(dataset, fraction, seed):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    cut = int(len(order) * (1 - fraction))
    return Subset(dataset, order[:cut]), Subset(dataset, order[cut:])


class Net(nn.Module):
    def __init__(self, width=16, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.block = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(width, width * 2, 3, padding=1),
                                   nn.BatchNorm2d(width * 2), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(width * 2 * 8 * 8, classes)

    def forward(self, x):
        return self.head(torch.flatten(self.block(self.stem(x)), 1))


class Trainer:
    def __init__(self, model, loaders, device, lr, patience):
        self.model = model
        self.train_loader, self.eval_loader = loaders
        self.device = device
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        self.criterion = nn.CrossEntropyLoss()
        self.patience = patience
        self.best = math.inf
        self.bad_epochs = 0

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

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        stats = torch.zeros(3, device=self.device)
        for images, targets in self.eval_loader:
            images, targets = images.to(self.device), targets.to(self.device)
            logits = self.model(images)
            stats[0] += self.criterion(logits, targets) * targets.numel()
            stats[1] += (logits.argmax(1) == targets).sum()
            stats[2] += targets.numel()
        dist.all_reduce(stats)
        return (stats[0] / stats[2]).item(), (stats[1] / stats[2]).item()

    def should_stop(self, val_loss):
        if val_loss < self.best - 1e-4:
            self.best, self.bad_epochs = val_loss, 0
            return False
        self.bad_epochs += 1
        return self.bad_epochs >= self.patience


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="./data")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--patience", type=int, default=3)
    return p.parse_args()


def main():
    args = parse()
    seed_everything(1234)
    cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    torch.manual_seed(1234)
    full = read_batches(args.data_dir, [f"data_batch_{n}" for n in range(1, 6)])
    train_set, held_out = split_holdout(full, 0.1, seed=1234)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=1234)
    eval_sampler = DistributedSampler(held_out, shuffle=False)
    loaders = (DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler),
               DataLoader(held_out, batch_size=256, sampler=eval_sampler))
    net = nn.SyncBatchNorm.convert_sync_batchnorm(Net()).to(device)
    net = DDP(net, device_ids=[local] if cuda else None)
    trainer = Trainer(net, loaders, device, args.lr * world * args.batch_size / 64, args.patience)
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        started = time.time()
        train_loss = trainer.one_epoch()
        val_loss, val_acc = trainer.evaluate()
        if rank == 0:
            print(f"epoch {epoch}: loss {train_loss:.4f} val {val_loss:.4f} acc {val_acc:.3f} "
                  f"({time.time() - started:.1f}s)")
            torch.save(net.module.state_dict(), "checkpoint.pt")
        if trainer.should_stop(val_loss):
            break
    if rank == 0:
        print(environment_report())
        final_report(net, loaders[1], device, [train_loss])
    dist.destroy_process_group()


def final_report(net, loader, device, losses):
    net.eval()
    preds, labels = [], []
    with torch.no_grad():
        for xb, yb in loader:
            preds.append(net(xb.to(device)).argmax(1).cpu())
            labels.append(yb)
    matrix = confusion_matrix(torch.cat(preds), torch.cat(labels))
    print("per class:", describe_classes(per_class_accuracy(matrix)))
    print(f"macro F1 {macro_f1(matrix):.3f}")
    print("loss curve:", sparkline(losses))


if __name__ == "__main__":
    main()
