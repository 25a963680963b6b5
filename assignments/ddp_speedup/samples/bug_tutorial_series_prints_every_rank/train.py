"""Sample (one true finding) adapted from pytorch/examples, distributed/ddp-tutorial-series/multigpu_torchrun.py
(BSD-3-Clause, read at commit 22e5a03). The structure is the public script's: a ``Trainer`` class
that takes the model, loader and optimizer; ``LOCAL_RANK`` read from the environment as its device
id; a snapshot (model state and epochs run) loaded if one exists and saved every ``save_every``
epochs by the process whose local rank is 0; one line per epoch printed by *every* rank
("[GPU1] Epoch 0 | Batchsize ..."), as the tutorial does; a ``DistributedSampler`` with the
loader's ``shuffle=False``; ``set_epoch`` every epoch.

Changed for this homework (marked ``# changed``): the homework's CNN with SyncBatchNorm and its
CIFAR-10 files instead of ``nn.Linear(20, 1)`` on random tensors; gloo on the CPU when there is no
GPU; ``--data-dir``/``--epochs`` options with defaults instead of two positional arguments;
``set_epoch`` called inside ``_run_epoch`` (the tutorial's single-GPU file calls it there too).

Everything the chapter's checklist asks is right except the output: the tutorial prints one line per
epoch from every rank (to show that each GPU works), and the homework asks for rank-0-only printing,
so ``io.rank0_only`` warns and every other check passes.
"""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup():
    backend = "nccl" if torch.cuda.is_available() else "gloo"  # changed: CPU grading
    dist.init_process_group(backend=backend)


def device_for(local_rank):  # changed: CPU grading
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.device = device_for(self.gpu_id)
        self.model = model.to(self.device)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        ids = [self.gpu_id] if self.device.type == "cuda" else None  # changed
        self.model = DDP(self.model, device_ids=ids)

    def _load_snapshot(self, path):
        snapshot = torch.load(path, map_location=self.device)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = nn.CrossEntropyLoss()(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source.to(self.device), targets.to(self.device))

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
        torch.save(snapshot, "snapshot.pt")
        print(f"Epoch {epoch} | Training snapshot saved at snapshot.pt")

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs(data_dir):  # changed: the homework's data and model
    folder = os.path.join(data_dir, "cifar-10-batches-py")
    xs, ys = [], []
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}"), "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        xs.append(batch[b"data"])
        ys.extend(batch[b"labels"])
    x = torch.from_numpy(np.concatenate(xs)).float().div_(255).view(-1, 3, 32, 32)
    train_set = TensorDataset(x, torch.tensor(ys))
    torch.manual_seed(0)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=torch.cuda.is_available(), shuffle=False,
                      sampler=DistributedSampler(dataset))


def main(save_every, total_epochs, batch_size, data_dir, snapshot_path="snapshot.pt"):
    ddp_setup()
    dataset, model, optimizer = load_train_objs(data_dir)
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("--epochs", type=int, default=5)  # changed: named, as the homework runs it
    parser.add_argument("--save-every", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--data-dir", default="./data")
    args = parser.parse_args()
    main(args.save_every, args.epochs, args.batch_size, args.data_dir)
