# A small residual network and a map-style dataset with random crops.
import argparse, os, pickle
import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import Dataset, DataLoader, DistributedSampler


class CifarTrain(Dataset):
    def __init__(self, root, augment=True):
        blobs = []
        for n in range(5):
            with open(os.path.join(root, 'cifar-10-batches-py', 'data_batch_%d' % (n + 1)), 'rb') as h:
                blobs.append(pickle.load(h, encoding='latin1'))
        self.x = np.concatenate([b['data'] for b in blobs]).reshape(-1, 3, 32, 32)
        self.y = np.concatenate([b['labels'] for b in blobs])
        self.augment = augment

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        img = torch.tensor(self.x[i], dtype=torch.float32) / 255.
        if self.augment:
            img = nn.functional.pad(img, (4, 4, 4, 4), mode='reflect')
            dx, dy = np.random.randint(0, 9, size=2)
            img = img[:, dy:dy + 32, dx:dx + 32]
            if np.random.rand() < 0.5:
                img = img.flip(2)
        return img, int(self.y[i])


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                               nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c))

    def forward(self, x):
        return torch.relu(x + self.f(x))


def build():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         Residual(32), nn.MaxPool2d(2), Residual(32), nn.MaxPool2d(2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def run(opt):
    dist.init_process_group('gloo')
    rank = dist.get_rank()
    np.random.seed(rank)
    ds = CifarTrain(opt.data_dir)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=opt.batch_size, sampler=sampler, num_workers=2)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(build()))
    optimizer = torch.optim.SGD(model.parameters(), lr=opt.lr, momentum=0.9, weight_decay=5e-4)
    for ep in range(opt.epochs):
        sampler.set_epoch(ep)
        tot = cnt = 0
        for a, b in loader:
            out = model(a)
            loss = nn.functional.cross_entropy(out, b)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            tot += loss.item() * a.shape[0]
            cnt += a.shape[0]
        if rank == 0:
            print('epoch', ep, 'loss', round(tot / cnt, 4))
            torch.save(model.module.state_dict(), 'checkpoint.pt')
    dist.destroy_process_group()


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--data-dir', default='./data')
    ap.add_argument('--epochs', type=int, default=5)
    ap.add_argument('--batch-size', type=int, default=64)
    ap.add_argument('--lr', type=float, default=0.02)
    run(ap.parse_args())
