# Adapted from pytorch/examples, distributed/ddp-tutorial-series/multigpu_torchrun.py
# (BSD-3-Clause, commit 22e5a03). Lines marked "# CHANGED" differ from the tutorial;
# this student kept its Trainer (renamed a few things) and wrote their own data and model code.
import argparse
import os
import pickle

import numpy as np
import torch
import torch.nn.functional as F  # CHANGED
from torch.utils.data import DataLoader, TensorDataset  # CHANGED
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group, get_rank  # CHANGED


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path) -> None:  # CHANGED: no hints
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))  # CHANGED: name
        self.dev = torch.device("cpu")  # CHANGED: CPU homework
        self.model = model.to(self.dev)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)

        self.model = DDP(self.model)  # CHANGED: no device_ids on CPU

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)  # CHANGED: functional loss
        loss.backward()
        self.optimizer.step()
        return loss.detach()  # CHANGED

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)  # CHANGED: DistributedSampler needs it
        losses = []  # CHANGED
        for source, targets in self.train_data:
            source = source.to(self.dev)
            targets = targets.to(self.dev)
            losses.append(self._run_batch(source, targets))
        if get_rank() == 0:  # CHANGED
            print(f"epoch {epoch}: loss {torch.stack(losses).mean():.4f}")  # CHANGED

    def _save_snapshot(self, epoch):
        snapshot = {}
        snapshot["MODEL_STATE"] = self.model.module.state_dict()
        snapshot["EPOCHS_RUN"] = epoch
        torch.save(snapshot, "checkpoint.pt")  # CHANGED
        print(f"Epoch {epoch} | Training snapshot saved at checkpoint.pt")  # CHANGED

    def train(self, max_epochs: int):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.local_rank == 0 and epoch % self.save_every == 0:  # CHANGED: name
                self._save_snapshot(epoch)


class Cnn(torch.nn.Module):  # CHANGED: own model
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 24, 5, padding=2)
        self.c2 = torch.nn.Conv2d(24, 48, 5, padding=2)
        self.out = torch.nn.Linear(48 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.out(x.flatten(1))


def cifar(data_dir):  # CHANGED: own data code
    xs, ys = [], []
    for k in range(1, 6):
        path = os.path.join(data_dir, "cifar-10-batches-py", "data_batch_%d" % k)
        with open(path, "rb") as handle:
            raw = pickle.load(handle, encoding="latin1")
        xs.append(raw["data"])
        ys += raw["labels"]
    images = torch.tensor(np.concatenate(xs), dtype=torch.float32).reshape(-1, 3, 32, 32) / 255.0
    return TensorDataset(images, torch.tensor(ys))


def main(args):  # CHANGED: one argument
    init_process_group(backend="gloo")  # CHANGED: ddp_setup inlined
    dataset = cifar(args.data_dir)
    model = Cnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)  # CHANGED
    train_data = DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                            sampler=DistributedSampler(dataset))  # CHANGED: prepare_dataloader inlined
    trainer = Trainer(model, train_data, optimizer, 1, "snapshot.pt")
    trainer.train(args.epochs)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description='simple distributed training job')
    parser.add_argument('--data-dir', default='./data')  # CHANGED
    parser.add_argument('--epochs', type=int, default=5)  # CHANGED
    parser.add_argument('--batch-size', type=int, default=64)  # CHANGED
    parser.add_argument('--lr', type=float, default=1e-3)  # CHANGED
    main(parser.parse_args())
