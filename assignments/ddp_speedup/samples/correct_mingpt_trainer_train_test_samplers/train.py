"""Correct sample adapted from pytorch/examples, distributed/minGPT-ddp/mingpt/trainer.py and main.py
(BSD-3-Clause). The structure is the public script's: a ``Trainer`` that builds one DataLoader per
data set, each with its own ``DistributedSampler`` (``shuffle=False`` on the loader), a data set split
by ``random_split`` into train and test, ``set_epoch`` on the train sampler only, and an evaluation
pass over the test loader after every training epoch.

Changed for this homework (marked ``# changed``): a small CNN on the homework's CIFAR-10 instead of
GPT on a character data set; argparse instead of hydra; no fsspec/boto3 snapshots (rank 0 saves a
state dict); CPU/gloo when there is no GPU; no AMP; SyncBatchNorm; the learning rate scaled by the
global batch; ``torch.manual_seed(0)`` before ``random_split`` (the public script has none, so each
rank splits differently: see ``bug_mingpt_unseeded_random_split``).
"""
import argparse
import os
import pickle
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainerConfig:
    max_epochs: int = None
    batch_size: int = None
    data_loader_workers: int = None
    grad_norm_clip: float = None
    save_every: int = None


class Trainer:

    def __init__(self, trainer_config: TrainerConfig, model, optimizer, train_dataset, test_dataset=None):
        self.config = trainer_config
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.device = torch.device(f"cuda:{self.local_rank}" if torch.cuda.is_available() else "cpu")  # changed
        self.train_dataset = train_dataset
        self.train_loader = self._prepare_dataloader(train_dataset)
        self.test_loader = self._prepare_dataloader(test_dataset) if test_dataset else None
        self.epochs_run = 0
        self.model = model.to(self.device)
        self.optimizer = optimizer
        self.save_every = self.config.save_every
        self.model = DDP(self.model, device_ids=[self.local_rank] if self.device.type == "cuda" else None)  # changed
        self.loss_fn = nn.CrossEntropyLoss()  # changed: the GPT computed its own loss

    def _prepare_dataloader(self, dataset: Dataset):
        return DataLoader(
            dataset,
            batch_size=self.config.batch_size,
            pin_memory=self.device.type == "cuda",  # changed
            shuffle=False,
            num_workers=self.config.data_loader_workers,
            sampler=DistributedSampler(dataset)
        )

    def _run_batch(self, source, targets, train: bool = True) -> float:
        with torch.set_grad_enabled(train):
            loss = self.loss_fn(self.model(source), targets)  # changed
        if train:
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
            self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int, dataloader: DataLoader, train: bool = True):
        if train:
            dataloader.sampler.set_epoch(epoch)
        self.model.train(train)  # changed: BatchNorm in eval mode for the test pass
        for iter, (source, targets) in enumerate(dataloader):
            step_type = "Train" if train else "Eval"
            source = source.to(self.device)
            targets = targets.to(self.device)
            batch_loss = self._run_batch(source, targets, train)
            if iter % 100 == 0 and self.global_rank == 0:  # changed: rank 0 only
                print(f"[RANK{self.global_rank}] Epoch {epoch} | Iter {iter} | {step_type} Loss {batch_loss:.5f}")

    def _save_snapshot(self, epoch):
        torch.save({"model_state": self.model.module.state_dict(), "finished_epoch": epoch},  # changed
                   "snapshot.pt")
        print(f"Snapshot saved at epoch {epoch}")

    def train(self):
        for epoch in range(self.epochs_run, self.config.max_epochs):
            epoch += 1
            self._run_epoch(epoch, self.train_loader, train=True)
            if self.global_rank == 0 and epoch % self.save_every == 0:  # changed: global rank
                self._save_snapshot(epoch)
            if self.test_loader:
                self._run_epoch(epoch, self.test_loader, train=False)


def load_cifar(data_dir):  # changed: the homework's data instead of CharDataset
    folder = os.path.join(data_dir, "cifar-10-batches-py")
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}"), "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        xs.append(batch[b"data"])
        ys.extend(batch[b"labels"])
    x = torch.from_numpy(np.concatenate(xs)).float().div_(255).view(-1, 3, 32, 32)
    return TensorDataset(x, torch.tensor(ys))


def get_train_objs(data_dir, lr):
    dataset = load_cifar(data_dir)
    train_len = int(len(dataset) * 0.9)
    train_set, test_set = random_split(dataset, [train_len, len(dataset) - train_len])
    model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(  # changed: a small CNN, not GPT
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return model, optimizer, train_set, test_set


def main():
    parser = argparse.ArgumentParser()  # changed: argparse instead of hydra
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    init_process_group("nccl" if torch.cuda.is_available() else "gloo")  # changed
    world = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)  # changed: the same random_split on every rank (torch seeds each process at random)
    model, optimizer, train_data, test_data = get_train_objs(args.data_dir, lr=0.02 * world)
    cfg = TrainerConfig(max_epochs=args.epochs, batch_size=64, data_loader_workers=0, grad_norm_clip=1.0,
                        save_every=1)
    trainer = Trainer(cfg, model, optimizer, train_data, test_data)
    trainer.train()
    destroy_process_group()


if __name__ == "__main__":
    main()
