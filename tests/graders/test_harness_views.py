"""The harness's global view of per-rank data sets: local indices 0..n-1 become the base samples they stand for."""
from __future__ import annotations

import sys

import pytest

from graders.torchrun import HARNESS_DIR

torch = pytest.importorskip("torch")
sys.path.insert(0, str(HARNESS_DIR))
from distgrade_harness.hooks import global_view  # noqa: E402

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
