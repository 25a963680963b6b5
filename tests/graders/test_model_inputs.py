"""What reached the model: the marks in the synthetic images, read whatever the
script did to its batches, and the sampler checks judged from them."""
from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest
import torch

from coursework.report import CheckStatus
from graders import cifar
from graders.checks import ddp, inputs
from graders.sandbox import SandboxResult
from graders.torchrun import HARNESS_DIR, RankStream, TorchrunRun

sys.path.insert(0, str(HARNESS_DIR))
from distgrade_harness import marks  # noqa: E402  (the harness's own reader, as the ranks run it)

sys.path.remove(str(HARNESS_DIR))
MEAN = torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1)
STD = torch.tensor([0.25, 0.24, 0.26]).view(1, 3, 1, 1)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = cifar.write_synthetic(tmp_path_factory.mktemp("marks"), per_batch=128, test_size=64, seed=7)
    xs = []
    for i in range(1, 6):
        with open(folder / f"data_batch_{i}", "rb") as f:
            xs.append(pickle.load(f, encoding="bytes")[b"data"])
    with open(folder / "test_batch", "rb") as f:
        test = pickle.load(f, encoding="bytes")[b"data"]
    as_float = lambda a: torch.from_numpy(a).float().div(255).view(-1, 3, 32, 32)  # noqa: E731
    return as_float(np.concatenate(xs)), as_float(test)


def _augment(batch, gen):
    """torchvision's RandomCrop(32, padding=4) + RandomHorizontalFlip + Normalize, by hand."""
    out = []
    for img in batch:
        i, j = torch.randint(0, 9, (2,), generator=gen).tolist()
        crop = torch.nn.functional.pad(img, (4, 4, 4, 4))[:, i:i + 32, j:j + 32]
        out.append(crop.flip(2) if torch.rand(1, generator=gen) < 0.5 else crop)
    return (torch.stack(out) - MEAN) / STD


def test_every_training_image_reads_as_its_index_in_file_order(images):
    train, test = images
    assert marks.Reader().read(train) == list(range(len(train)))
    assert marks.Reader().read(test) == [marks.CAPACITY - 1 - j for j in range(len(test))]  # from the top down


def test_marks_survive_crops_flips_normalisation_scaling_and_flattening(images):
    train, _ = images
    reader, gen = marks.Reader(), torch.Generator().manual_seed(0)
    got = reader.read(_augment(train, gen))
    right = sum(g == i for i, g in enumerate(got))
    assert right >= 0.99 * len(train) and all(g in (i, -1) for i, g in enumerate(got))  # unread, never misread
    assert reader.read(train * 255 - 7) == list(range(len(train)))
    assert reader.read(train[:10].reshape(10, -1)) == list(range(10))


def test_unmarked_or_changed_images_read_as_unknown_never_as_a_sample(images):
    train, _ = images
    reader, gen = marks.Reader(), torch.Generator().manual_seed(1)
    assert all(v == -1 for v in reader.read(torch.randn(2000, 3, 32, 32, generator=gen)))
    mixed = 0.5 * train[:200] + 0.5 * train[200:400]  # mix-up of two images
    assert sum(v != -1 for v in reader.read(mixed)) <= 0.05 * len(mixed)  # a run this mixed is not observed (MIN_READ)
    assert reader.read(torch.randn(4, 3, 28, 28)) is None and reader.read(torch.randn(4, 10)) is None


def test_a_set_too_large_to_mark_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at most"):
        cifar.write_synthetic(tmp_path, per_batch=1000, test_size=10)


# -- checks over the marks a run's ranks read -------------------------------------------------------

def _run(seen: dict[int, list[list[int]]], size: int, unread: int = 0, loader=None) -> TorchrunRun:
    """Two ranks that stepped with ``seen[r][t]`` samples at step t; ``loader``: per rank, epoch index lists."""
    ranks = {}
    for r, rows in seen.items():
        s = RankStream(r)
        s.records.append({"type": "process_group", "world": len(seen), "backend": "gloo"})
        s.records.append({"type": "ddp", "batchnorm": 0, "syncbatchnorm": 2, "parameters": 10, "device": "cpu"})
        for k, idx in enumerate((loader or {}).get(r, [])):
            s.records.append({"type": "epoch", "loader": 1, "epoch": k, "kind": "map", "complete": True,
                              "batches": len(idx) // 4, "batch_size": 4, "indices": idx,
                              "sampler": "DistributedSampler", "dataset_len": size, "drop_last": False})
        n = len(rows)
        s.records.append({"type": "steps", "t": [0.1 * i for i in range(n)], "samples": [4] * n, "loss": [1.0] * n,
                          "backwards": [1] * n, "synced": [1] * n, "seen": rows, "unread": [unread] * n})
        s.records.append({"type": "finished", "steps": n, "digest": "d", "param_sums": [1.0],
                          "model_source": "ddp", "process_group": len(seen)})
        ranks[r] = s
    run = TorchrunRun(nproc=len(seen), result=SandboxResult(returncode=0, timed_out=False, wall_s=1.0, stderr=""),
                      ranks=ranks, stacks={}, logs={}, tampering=[])
    run.evidence["inputs"] = {"train_size": size}
    return run


def _batches(seq, bs=8):
    return [seq[i:i + bs] for i in range(0, len(seq), bs)]


def _sharded(size=400, epochs=3, world=2, reshuffle=True):
    out = {r: [] for r in range(world)}
    for e in range(epochs):
        order = torch.randperm(size, generator=torch.Generator().manual_seed(e if reshuffle else 0)).tolist()
        for r in range(world):
            out[r] += _batches(order[r::world])
    return out


def test_an_honest_split_without_a_dataloader_passes_every_sampler_check():
    run = _run(_sharded(), 400)
    assert [f(run).key for f in (ddp.check_disjoint, ddp.check_coverage, ddp.check_reshuffle)] == ["ok_at_model"] * 3


def test_random_draws_from_the_whole_set_overlap_in_the_same_steps_and_have_no_epochs():
    gens = {r: torch.Generator().manual_seed(1337 + r) for r in range(2)}
    run = _run({r: [torch.randint(400, (8,), generator=gens[r]).tolist() for _ in range(75)] for r in range(2)}, 400)
    f = ddp.check_disjoint(run)
    assert (f.status, f.key) == (CheckStatus.FAIL, "overlap_at_model") and f.params["shared"] > 3
    assert ddp.check_coverage(run).key == ddp.check_reshuffle(run).key == "ok_draws_at_model"  # judged all the same


def test_random_draws_each_from_its_own_shard_are_disjoint():
    gens = {r: torch.Generator().manual_seed(r) for r in range(2)}
    run = _run({r: [(torch.randint(200, (8,), generator=gens[r]) * 2 + r).tolist() for _ in range(75)]
                for r in range(2)}, 400)
    assert ddp.check_disjoint(run).key == "ok_at_model"


def test_one_order_for_every_epoch_is_seen_at_the_model():
    f = ddp.check_reshuffle(_run(_sharded(reshuffle=False), 400))
    assert (f.status, f.key) == (CheckStatus.FAIL, "same_order_at_model")


def test_coverage_counts_what_the_run_trained_on_a_held_out_part_is_not_missing():
    train_part = list(range(300))  # 100 samples kept for validation, never trained on
    seen = {r: [] for r in range(2)}
    for e in range(2):
        order = [train_part[i] for i in torch.randperm(300, generator=torch.Generator().manual_seed(e))]
        for r in range(2):
            seen[r] += _batches(order[r::2])
    assert ddp.check_coverage(_run(seen, 400)).key == "ok_at_model"


def test_shares_hard_coded_for_four_ranks_miss_half_of_each_epoch():
    seen = {r: [] for r in range(2)}
    for e in range(3):
        order = torch.randperm(400, generator=torch.Generator().manual_seed(e)).tolist()
        for r in range(2):
            seen[r] += _batches(order[r::4])  # num_replicas=4 with two processes
    f = ddp.check_coverage(_run(seen, 400))
    assert (f.status, f.key) == (CheckStatus.FAIL, "missing_at_model") and f.params["missing"] > 100


def test_a_sampler_that_lies_is_contradicted_by_what_reached_the_model():
    size = 400
    orders = [torch.randperm(size, generator=torch.Generator().manual_seed(k)).tolist() for k in range(2)]
    loader = {r: [order[r::2] for order in orders] for r in range(2)}  # disjoint, reshuffled indices handed out
    same = [_batches(list(range(200))) * 2 for _ in range(2)]  # ... but both ranks trained on 0..199, twice
    run = _run({0: same[0], 1: same[1]}, size, loader=loader)
    f = ddp.check_disjoint(run)
    assert (f.status, f.key) == (CheckStatus.FAIL, "overlap_at_model_contradiction")
    assert f.evidence["dataloader"] and ddp.check_reshuffle(run).key == "same_order_at_model_contradiction"


def test_too_few_readable_marks_earn_nothing_whatever_the_dataloader_says():
    size = 400
    orders = [torch.randperm(size, generator=torch.Generator().manual_seed(k)).tolist() for k in range(3)]
    loader = {r: [order[r::2] for order in orders] for r in range(2)}  # disjoint, reshuffled indices handed out
    run = _run(_sharded(), size, unread=8, loader=loader)  # as many unread as read in every step (mixup)
    assert inputs.read(run) is None and inputs.shortfall(run)["rank"] == 0
    for check in (ddp.check_disjoint, ddp.check_coverage, ddp.check_reshuffle):
        f = check(run)
        assert (f.status, f.key) == (CheckStatus.SKIP, "unread_at_model"), f
        assert f.evidence["dataloader"]["key"] == "ok"  # kept for the instructor, not credited
    blank = _sharded()
    blank[1] = [[] for _ in blank[1]]  # rank 1 fed the model images with no mark at all (blank, or features)
    f = ddp.check_coverage(_run(blank, size, loader=loader))  # (disjoint also fails on the work share)
    assert (f.key, f.params["rank"], f.params["read"]) == ("unread_at_model", 1, 0)


def test_coverage_counts_what_ever_reached_the_model_against_the_training_files():
    tenth = {r: [] for r in range(2)}
    for e in range(6):  # a "debug subset": a tenth of the data in proper epochs
        order = torch.randperm(40, generator=torch.Generator().manual_seed(e)).tolist()
        for r in range(2):
            tenth[r] += _batches(order[r::2], 4)
    f = ddp.check_coverage(_run(tenth, 400))
    assert (f.status, f.key, f.params["seen"]) == (CheckStatus.FAIL, "subset_at_model", 40)
    gens = {r: torch.Generator().manual_seed(r) for r in range(2)}
    draws = {r: [(torch.randint(20, (8,), generator=gens[r]) * 2 + r).tolist() for _ in range(50)] for r in range(2)}
    f = ddp.check_coverage(_run(draws, 400), 2)  # random draws from a tenth, as many as 2 epochs' worth
    assert (f.status, f.key) == (CheckStatus.FAIL, "subset_at_model")
    whole = {r: [(torch.randint(200, (8,), generator=gens[r]) * 2 + r).tolist() for _ in range(50)] for r in range(2)}
    f = ddp.check_coverage(_run(whole, 400), 2)
    assert (f.status, f.key) == (CheckStatus.PASS, "ok_draws_at_model") and f.params["seen"] > 0.8 * 400


def test_random_draws_seeded_again_every_epoch_repeat_whole_batches():
    epoch = {}
    for r in range(2):
        gen = torch.Generator().manual_seed(100 + r)
        epoch[r] = [(torch.randint(200, (8,), generator=gen) * 2 + r).tolist() for _ in range(25)]
    f = ddp.check_reshuffle(_run({r: epoch[r] * 3 for r in range(2)}, 400))
    assert (f.status, f.key, f.params["epochs"]) == (CheckStatus.FAIL, "same_draws_at_model", 3)


def test_without_marks_the_loader_alone_decides():
    run = _run(_sharded(), 400)
    run.evidence.pop("inputs")  # real CIFAR on a GPU host: nothing marked
    assert inputs.read(run) is None and ddp.check_disjoint(run).key == "not_observed"


def test_the_harness_reads_every_training_batch_once_however_it_is_fed(images, monkeypatch):
    """Temporaries freed between micro-batches may reuse their memory, a staging buffer is refilled in
    place: each is still a batch of its own; a forward counts once its backward runs (an evaluation
    left in training mode with gradients on trains nothing);
    the DDP-like wrapper and its inner module see one tensor, read once; no_grad is not training, and a forward
    in eval mode followed by a backward is (the flag is the script's to set)."""
    from torch.nn.modules import module as nn_module

    from distgrade_harness import hooks
    train, _ = images
    monkeypatch.setattr(nn_module, "_global_forward_pre_hooks", type(nn_module._global_forward_pre_hooks)())
    monkeypatch.setattr(torch, "compile", torch.compile)
    obs = hooks.Observer(stream=None, rank=0)
    obs.reading = True
    obs._hook_inputs()
    monkeypatch.setattr(torch.autograd, "backward", torch.autograd.backward)
    obs._hook_backward()
    model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Conv2d(3, 2, 3), torch.nn.Flatten(), torch.nn.Linear(1800, 10)))
    for start in range(0, 64, 8):
        model(train[start:start + 8].clone()).sum().backward()  # each batch freed before the next
    buffer = torch.empty(8, 3, 32, 32)  # a staging buffer refilled in place
    for start in range(64, 96, 8):
        buffer.copy_(train[start:start + 8])
        model(buffer).sum().backward()
    assert obs.seen == list(range(96))
    model(train[96:100].clone())  # no backward follows
    with torch.no_grad():
        model(train[100:108].clone())
    model.eval()
    model(train[108:116].clone())  # an evaluation: no backward follows
    model(train[116:120].clone()).sum().backward()  # a stray model.eval(): still training
    assert obs.seen == [*range(96), *range(116, 120)] and obs.unread == 0


def test_a_second_model_before_the_backward_counts_and_the_same_model_rewrapped_does_not(images, monkeypatch):
    """Every batch a trained module took before the backward counts (a decoy fed this rank's shard after the
    model took the global batch is seen), but a stray forward through the module inside a DDP wrapper, then
    the training forward through the wrapper, is one model: its batch replaces the stray one."""
    from torch.nn.modules import module as nn_module

    from distgrade_harness import hooks
    train, _ = images
    monkeypatch.setattr(nn_module, "_global_forward_pre_hooks", type(nn_module._global_forward_pre_hooks)())
    monkeypatch.setattr(torch, "compile", torch.compile)
    monkeypatch.setattr(torch.autograd, "backward", torch.autograd.backward)
    monkeypatch.setattr(torch.autograd, "grad", torch.autograd.grad)
    sent = []
    obs = hooks.Observer(stream=type("Stream", (), {"send": lambda self, record: sent.append(record)})(), rank=0)
    obs.reading = True
    obs._hook_inputs()
    obs._hook_backward()

    class DistributedDataParallel(torch.nn.Module):  # unwrapped by name, as the real one is
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, x):
            return self.module(x)
    inner = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 3), torch.nn.Flatten(), torch.nn.Linear(1800, 10))
    model = DistributedDataParallel(inner)
    inner(train[0:8].clone())  # a stray forward with gradients on, through the module DDP wraps
    model(train[8:16].clone()).sum().backward()
    assert obs.seen == list(range(8, 16))
    decoy = torch.nn.Linear(3 * 32 * 32, 1)
    loss = model(train[16:32].clone()).sum()  # the "global batch"
    loss = loss + 0.0 * decoy(train[16:24].clone().flatten(1)).sum()  # this rank's "shard", shown last
    loss.backward()
    seen = [i for row in obs.steps for i in row[11]] + obs.seen  # a new trained module's parameters: a step by hand
    assert seen == [*range(8, 16), *range(16, 32), *range(16, 24)]


# -- disjoint over an epoch, and the marks over a loader's local indices -----------------------------

def _distributed(size, world, bs, epochs=3, drop_last=False, loader_drop=False, seed=0):
    """What torch's own DistributedSampler hands each rank, batched as a DataLoader would."""
    from torch.utils.data import DistributedSampler
    out = {r: [] for r in range(world)}
    for r in range(world):
        sampler = DistributedSampler(range(size), num_replicas=world, rank=r, shuffle=True, seed=seed,
                                     drop_last=drop_last)
        for e in range(epochs):
            sampler.set_epoch(e)
            batches = _batches(list(sampler), bs)
            out[r] += batches[:-1] if loader_drop and len(batches[-1]) < bs else batches
    return out


@pytest.mark.parametrize("size,world,bs,drop_last,loader_drop", [
    (400, 2, 8, False, False), (403, 2, 8, False, False), (403, 4, 5, False, False), (403, 4, 5, True, True),
    (400, 2, 64, True, True), (1280, 2, 64, True, False), (401, 3, 2, False, False), (400, 4, 1, False, False)])
def test_a_distributed_sampler_is_disjoint_over_every_epoch_whatever_the_padding_or_batch(
        size, world, bs, drop_last, loader_drop):
    for seed in range(40):  # the passes read from the marks drift a few samples into the next epoch, by chance
        f = ddp.check_disjoint(_run(_distributed(size, world, bs, 3, drop_last, loader_drop, seed), size))
        assert (f.status, f.key) == (CheckStatus.PASS, "ok_at_model"), (seed, f)


def test_a_hand_written_strided_sampler_is_disjoint_over_every_epoch():
    for seed in range(40):
        seen = {r: [] for r in range(2)}
        for e in range(4):
            order = torch.randperm(400, generator=torch.Generator().manual_seed(1000 * seed + e)).tolist()
            for r in range(2):
                seen[r] += _batches(order[r::2], 16)
        assert ddp.check_disjoint(_run(seen, 400)).key == "ok_at_model", seed


def test_batches_staggered_by_rank_walk_the_whole_set_every_epoch():
    """(k + rank) % n_batches: the same step's batches never overlap, but every rank trains on everything."""
    seen = {r: [] for r in range(2)}
    for e in range(3):
        batches = _batches(torch.randperm(400, generator=torch.Generator().manual_seed(e)).tolist())
        for r in range(2):
            seen[r] += [batches[(k + r) % len(batches)] for k in range(len(batches))]
    run = _run(seen, 400)
    assert inputs.overlap(inputs.read(run)) is None  # step by step it looks split
    f = ddp.check_disjoint(run)
    assert (f.status, f.key) == (CheckStatus.FAIL, "overlap_epoch_at_model") and f.params["shared"] > 300
    assert f.params["of"] >= 384 and f.evidence["at_model"]


@pytest.mark.parametrize("epochs", [1, 2])
def test_every_rank_walking_the_whole_set_rotated_is_seen_though_a_repeat_hides_the_epochs(epochs):
    """Every rank walks one shuffled order of the whole set from its own offset (rank * n / N), so no step shares a
    sample, and repeats one sample early: the first run with no repeat is short, the marks read as random draws,
    and the passes are never compared. Each rank's first n samples still hold nearly all n (random draws reach
    63%, a DistributedSampler's halves over two epochs 75%)."""
    seen = {r: [] for r in range(2)}
    for e in range(epochs):
        order = torch.randperm(400, generator=torch.Generator().manual_seed(e)).tolist()
        for r in range(2):
            mine = order[200 * r:] + order[:200 * r]
            seen[r] += _batches(mine[:5] + mine[:1] + mine[5:])
    run = _run(seen, 400)
    assert inputs.passes(inputs.read(run)) is None  # read as random draws: the passes are not compared
    f = ddp.check_disjoint(run)
    assert (f.status, f.key) == (CheckStatus.FAIL, "overlap_epoch_at_model") and f.params["shared"] > 350, f


def test_a_split_kept_in_the_first_epoch_and_dropped_later_is_seen_in_the_later_epoch():
    """Correct in epoch 0, then every rank walks the whole set with its batches offset by the epoch."""
    seen = {r: [] for r in range(2)}
    for e in range(3):
        order = torch.randperm(400, generator=torch.Generator().manual_seed(e)).tolist()
        for r in range(2):
            if e == 0:
                seen[r] += _batches(order[r::2])
            else:
                batches = _batches(order)
                seen[r] += [batches[(k + r * e) % len(batches)] for k in range(len(batches))]
    f = ddp.check_disjoint(_run(seen, 400))
    assert (f.status, f.key) == (CheckStatus.FAIL, "overlap_epoch_at_model") and f.params["epoch"] >= 1


def test_a_loader_over_each_rank_s_own_shard_is_judged_by_the_marks_not_its_local_indices():
    """One shared permutation, perm[rank::world] as a data set of its own per rank, shuffled by its own loader:
    both loaders hand out 0..199 of their own shard, the marks show disjoint halves."""
    size = 400
    perm = torch.randperm(size, generator=torch.Generator().manual_seed(1234)).tolist()
    seen, loader = {r: [] for r in range(2)}, {r: [] for r in range(2)}
    for e in range(3):
        for r in range(2):
            local = torch.randperm(200, generator=torch.Generator().manual_seed(10 * e + r)).tolist()
            loader[r].append(local)
            seen[r] += _batches([perm[r::2][i] for i in local])
    run = _run(seen, size, loader=loader)
    for stream in run.ranks.values():
        for rec in stream.records:
            if rec["type"] == "epoch":
                rec.update(sampler="RandomSampler", dataset_len=200)
    assert ddp._loader_disjoint(run).status == CheckStatus.FAIL  # the loaders' word: both read 0..199
    f = ddp.check_disjoint(run)
    assert (f.status, f.key) == (CheckStatus.PASS, "ok_at_model"), f
    assert f.evidence["dataloader"]["key"] == "overlap_no_sampler"  # kept for the instructor
    run.evidence.pop("inputs")  # no marks (real CIFAR): the loaders' indices are all there is, and they fail
    assert ddp.check_disjoint(run).status == CheckStatus.FAIL
