"""A tiny training loop with callbacks (printing and saving are callbacks that check the rank)."""
import argparse
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class PrintLoss:
    def on_epoch_end(self, state):
        if state["rank"] == 0:
            print(f"epoch {state['epoch']}: loss {state['loss']:.4f}")


class SaveModel:
    def __init__(self, path):
        self.path = path

    def on_epoch_end(self, state):
        if state["rank"] == 0:
            torch.save(state["model"].module.state_dict(), self.path)


class Loop:
    def __init__(self, model, loader, optim, callbacks):
        self.model, self.loader, self.optim, self.callbacks = model, loader, optim, callbacks

    def fit(self, epochs):
        for epoch in range(epochs):
            self.loader.sampler.set_epoch(epoch)
            loss_sum = torch.zeros(())
            for batch in self.loader:
                loss_sum += self.step(*batch)
            state = {"epoch": epoch, "loss": loss_sum.item() / len(self.loader), "rank": dist.get_rank(),
                     "model": self.model}
            for cb in self.callbacks:
                cb.on_epoch_end(state)

    def step(self, inputs, labels):
        self.optim.zero_grad()
        loss = nn.functional.cross_entropy(self.model(inputs), labels)
        loss.backward()
        self.optim.step()
        return loss.detach()


def read(directory):
    frames = []
    for i in range(1, 6):
        with open(os.path.join(directory, "cifar-10-batches-py", f"data_batch_{i}"), mode="rb") as src:
            frames.append(pickle.load(src, encoding="bytes"))
    pix = np.concatenate([fr[b"data"] for fr in frames]).reshape((-1, 3, 32, 32))
    lab = np.array([l for fr in frames for l in fr[b"labels"]])
    return TensorDataset(torch.from_numpy(pix).to(torch.float32) / 255, torch.from_numpy(lab))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="./data")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    a = p.parse_args()
    dist.init_process_group("gloo")
    ds = read(a.data_dir)
    loader = DataLoader(ds, batch_size=a.batch_size, sampler=DistributedSampler(ds))
    net = nn.Sequential(nn.Conv2d(3, 16, 5, padding=2), nn.BatchNorm2d(16), nn.Tanh(), nn.AvgPool2d(2),
                        nn.Conv2d(16, 32, 5, padding=2), nn.BatchNorm2d(32), nn.Tanh(), nn.AvgPool2d(2),
                        nn.Flatten(), nn.Linear(2048, 10))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(net))
    Loop(model, loader, torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9),
         [PrintLoss(), SaveModel("checkpoint.pt")]).fit(a.epochs)
    dist.destroy_process_group()
