"""The harness's global view of per-rank data sets: local indices 0..n-1 become the base samples they stand for."""
from __future__ import annotations

import sys

import pytest

from graders.torchrun import HARNESS_DIR

torch = pytest.importorskip("torch")
sys.path.insert(0, str(HARNESS_DIR))
from distgrade_harness.hooks import global_view  # noqa: E402

from tests.graders import observed  # noqa: E402

from torch.utils.data import Subset, TensorDataset  # noqa: E402


class Partition:
    """The classic tutorial's per-rank view: a data set and the indices this rank owns."""

    def __init__(self, data, index):
        self.data, self.index = data, index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        return self.data[self.index[i]]


BASE = TensorDataset(torch.zeros(100, 1))


def test_two_ranks_partitions_map_to_disjoint_base_indices():
    order = list(range(100))[::-1]
    views = [global_view(Partition(BASE, order[r::2])) for r in range(2)]
    assert all(v[1] == 100 and v[2] == "Partition -> TensorDataset" for v in views)
    assert not set(views[0][0]) & set(views[1][0]) and set(views[0][0]) | set(views[1][0]) == set(range(100))


def test_nested_subsets_and_tensor_indices_are_followed():
    inner = Subset(BASE, list(range(50, 100)))
    assert global_view(Subset(inner, [0, 1, 2]))[0] == [50, 51, 52]
    assert global_view(Partition(BASE, torch.arange(10, 20)))[0] == list(range(10, 20))


class Labelled:
    """Labels are ints of the data set's own length, but repeat: not an index list."""

    def __init__(self):
        self.labels = [i % 10 for i in range(100)]
        self.images = list(range(200))

    def __len__(self):
        return 100


def test_label_lists_and_plain_data_sets_keep_their_own_numbering():
    assert global_view(Labelled()) == (None, None, None)
    assert global_view(BASE) == (None, None, None)
    assert global_view(Partition(BASE, [5, 500]))[0] is None  # out of range: not a view


HAND_REDUCE = r'''
import torch.distributed as dist
hooks.STEP_FLUSH = 1000  # every row stays in obs.steps to be read below
dist.init_process_group("gloo", init_method=f"file://{tempfile.mktemp()}", rank=0, world_size=1)
model = torch.nn.Linear(20, 5)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def run(mode, steps=4):
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 20)).sum().backward()
        if mode == "per_param":
            for p in model.parameters(): dist.all_reduce(p.grad)
        elif mode == "flat":
            flat = torch.cat([p.grad.view(-1) for p in model.parameters()])
            dist.all_reduce(flat)
            off = 0
            for p in model.parameters():
                p.grad.copy_(flat[off:off + p.numel()].view_as(p)); off += p.numel()
        elif mode == "flat_async":  # overlapped: the sum lands only when the student waits
            flat = torch.cat([p.grad.view(-1) for p in model.parameters()])
            work = dist.all_reduce(flat, async_op=True)
            work.wait()
            flat /= dist.get_world_size()
            off = 0
            for p in model.parameters():
                p.grad.copy_(flat[off:off + p.numel()].view_as(p)); off += p.numel()
        elif mode == "dummy":
            dist.all_reduce(torch.ones(200))
        elif mode == "dummy_async":
            dist.all_reduce(torch.ones(200), async_op=True).wait()
        opt.step()
        if mode == "params_after":  # plain SGD, then the parameters averaged: the same update as DDP
            flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
            dist.all_reduce(flat)
            flat /= dist.get_world_size()
            torch.nn.utils.vector_to_parameters(flat, model.parameters())
    obs._settle_step()  # the last step's all-reduces are read when its span ends (the next forward, or the end)
    return [row[7] for row in obs.steps[-steps:]]
print("per_param", run("per_param"))
print("flat", run("flat"))
print("flat_async", run("flat_async"))
print("dummy", run("dummy"))
print("dummy_async", run("dummy_async"))
print("none", run("none"))
print("params_after", run("params_after"))
'''


def test_gradients_all_reduced_by_hand_are_seen_and_a_dummy_buffer_is_not(tmp_path):
    """Per-parameter and flattened all_reduce of the grads count, synchronous or overlapped
    (``async_op=True`` then ``wait()``), and so do the parameters averaged after a plain SGD step; a dummy
    tensor does not.

    Runs in a subprocess: installing the observer patches torch for the whole interpreter."""
    out = observed.run(tmp_path, HAND_REDUCE)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.split(" ", 1)[0] in
                 ("per_param", "flat", "flat_async", "dummy", "dummy_async", "none", "params_after"))
    assert lines == {"per_param": "[1.0, 1.0, 1.0, 1.0]", "flat": "[1.0, 1.0, 1.0, 1.0]",
                     "flat_async": "[1.0, 1.0, 1.0, 1.0]", "dummy": "[0.0, 0.0, 0.0, 0.0]",
                     "dummy_async": "[0.0, 0.0, 0.0, 0.0]", "none": "[0.0, 0.0, 0.0, 0.0]",
                     "params_after": "[1.0, 1.0, 1.0, 1.0]"}, out.stderr[-2000:]
