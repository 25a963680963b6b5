# Adapted from pytorch/examples, distributed/ddp-tutorial-series/multigpu_torchrun.py
# (BSD-3-Clause, commit 22e5a03). Lines marked "# CHANGED" differ from the tutorial;
# ddp_setup, the Trainer's snapshot logic and the batch/epoch loop are the tutorial's.
import os
import pickle

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader, TensorDataset  # CHANGED: TensorDataset
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group


def ddp_setup():
    init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")  # CHANGED: gloo on CPU


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        train_data: DataLoader,
        optimizer: torch.optim.Optimizer,
        save_every: int,
        snapshot_path: str,
    ) -> None:
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.device = torch.device(f"cuda:{self.gpu_id}" if torch.cuda.is_available() else "cpu")  # CHANGED
        self.model = model.to(self.device)  # CHANGED: device instead of gpu_id
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)

        self.model = DDP(self.model, device_ids=[self.gpu_id] if torch.cuda.is_available() else None)  # CHANGED

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = torch.nn.CrossEntropyLoss()(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()  # CHANGED: report the loss

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        self.train_data.sampler.set_epoch(epoch)  # CHANGED: reshuffle every epoch
        total = 0.0  # CHANGED
        for source, targets in self.train_data:
            source = source.to(self.device)  # CHANGED
            targets = targets.to(self.device)  # CHANGED
            total += self._run_batch(source, targets)
        if self.gpu_id == 0:  # CHANGED: print on one rank only
            print(f"epoch {epoch}: loss {total / len(self.train_data):.4f} (batch {b_sz})")

    def _save_snapshot(self, epoch):
        snapshot = {}
        snapshot["MODEL_STATE"] = self.model.module.state_dict()
        snapshot["EPOCHS_RUN"] = epoch
        torch.save(snapshot, "checkpoint.pt")  # CHANGED: file name the homework asks for
        print(f"Epoch {epoch} | Training snapshot saved at checkpoint.pt")

    def train(self, max_epochs: int):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs(data_dir):  # CHANGED: CIFAR-10 and a small CNN instead of the toy data
    folder = os.path.join(data_dir, "cifar-10-batches-py")
    parts, labels = [], []
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}"), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        parts.append(d[b"data"])
        labels.extend(d[b"labels"])
    x = torch.from_numpy(np.concatenate(parts)).float().div(255).view(-1, 3, 32, 32)
    train_set = TensorDataset(x, torch.tensor(labels))
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=True,
        shuffle=False,
        sampler=DistributedSampler(dataset)
    )


def main(save_every: int, total_epochs: int, batch_size: int, snapshot_path: str = "snapshot.pt"):
    ddp_setup()
    dataset, model, optimizer = load_train_objs(os.environ.get("DATA_DIR", "./data"))  # CHANGED
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description='simple distributed training job')
    parser.add_argument('--epochs', type=int, default=5)  # CHANGED: the homework's options
    parser.add_argument('--save-every', type=int, default=1)  # CHANGED
    parser.add_argument('--batch-size', type=int, default=64)  # CHANGED
    parser.add_argument('--data-dir', default='./data')  # CHANGED
    args = parser.parse_args()
    os.environ["DATA_DIR"] = args.data_dir  # CHANGED
    main(args.save_every, args.epochs, args.batch_size)
