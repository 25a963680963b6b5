"""Gradient sync judged by what reached the update (``graders.checks.contrib``), whichever collective carried it.

The fake runs carry the per-step sketches the harness sends (``distgrade_harness.contrib``): each rank's local
gradient ``gl`` and the gradient its optimizer applied ``ga``, its parameters right after its own step ``pl`` and
after the step span ``ps``, its local gradient's squared norm ``gn``. The last test runs the real harness.
"""
from __future__ import annotations

import random

import pytest

from coursework.report import CheckStatus
from graders.checks import contrib, ddp
from tests.graders import observed
from tests.graders.test_ddp_checks import _run

K = contrib.K
STEPS = 12


def _vec(rng):
    return [rng.gauss(0.0, 1.0) for _ in range(K)]


def _add(a, b, k=1.0):
    return [x + k * y for x, y in zip(a, b)]


def _mean(vs):
    return [sum(c) / len(vs) for c in zip(*vs)]


def _with_sketches(run, style: str, seed: int = 0):
    """``run`` with the columns a script of ``style`` leaves: how its ranks' local gradients became the update."""
    rng = random.Random(seed)
    n = run.nproc
    cols = {r: {k: [] for k in ("gl", "ga", "pl", "ps", "gn", "gz", "ar")} for r in range(n)}
    params = _vec(rng)  # equal on every rank at the start
    for _ in range(STEPS):
        local = [_vec(rng) for _ in range(n)]
        if style == "idle_rank1":  # DDP: rank 1's buckets are zeros, the mean is rank 0's half
            local[1] = [0.0] * K
        mean = _mean(local)
        gl, ga, ps_after = list(local), None, None
        if style in ("allreduce_avg", "reduce_broadcast", "all_gather_mean", "flat_bucket_avg"):
            ga = [mean] * n
        elif style == "allreduce_sum":  # all_reduce(SUM) and no division: a larger step, the same direction
            ga = [[n * x for x in mean]] * n
        elif style == "clipped":  # clip_grad_norm_ after the sync: every rank scales the mean alike
            ga = [[0.3 * x for x in mean]] * n
        elif style == "clipped_before_sync":  # each rank clips its own gradient, then the all_reduce averages them
            scale = [0.3, 0.9, 0.6, 1.0][:n]
            ga = [_mean([[c * x for x in g] for c, g in zip(scale, local)])] * n
        elif style == "rank1_weighted_down":  # all_reduce of g * (1 if rank 0 else 0.02): rank 1's data barely counts
            ga = [_mean([[c * x for x in g] for c, g in zip([1.0] + [0.02] * (n - 1), local)])] * n
        elif style in ("ddp", "idle_rank1"):  # backward returns the averaged gradient already
            gl, ga = [mean] * n, [mean] * n
        elif style == "broadcast_rank0_grads":
            ga = [local[0]] * n
        elif style in ("param_average", "broadcast_rank0_weights"):
            ga = list(local)  # each optimizer steps its own gradient
        stepped = [_add(params, g, -0.1) for g in ga]
        if style == "param_average":
            ps_after = _mean(stepped)
        elif style == "broadcast_rank0_weights":  # p * (rank == 0), all_reduce(SUM)
            ps_after = stepped[0]
        else:
            ps_after = stepped[0]
        for r in range(n):
            c = cols[r]
            c["gl"].append(gl[r])
            c["ga"].append(ga[r])
            c["pl"].append(stepped[r])
            c["ps"].append(ps_after)
            c["gn"].append(sum(x * x for x in local[r]))
            c["gz"].append(0)
            c["ar"].append(0)
        params = ps_after
    for r in range(n):
        if style in ("ddp", "idle_rank1"):  # DDP wraps every stepped parameter (sync.ddp_drives)
            run.ranks[r].records.insert(0, {"type": "norms", "batchnorm": 0, "syncbatchnorm": 2, "syncbn_lone": 0,
                                            "sharded": False, "stepped": 10, "in_ddp": 10, "source": "trained"})
        steps = next(rec for rec in run.ranks[r].records if rec["type"] == "steps")
        steps.update({k: v[:len(steps["t"])] for k, v in cols[r].items()})
    return run


@pytest.mark.parametrize("style", ["allreduce_avg", "reduce_broadcast", "all_gather_mean", "flat_bucket_avg",
                                   "allreduce_sum", "clipped", "clipped_before_sync", "param_average"])
def test_any_collective_that_averages_the_ranks_work_is_synchronisation(style):
    run = _with_sketches(_run(sync=None, steps=STEPS), style)
    verdict = contrib.judge(run)
    assert not contrib.discarded(verdict) and verdict["idle"] is None, verdict
    assert ddp.sync_kind(run) == "hand"
    f = ddp.check_grad_sync(run)
    assert (f.status, f.key) == (CheckStatus.PASS, "ok_hand")
    assert ddp.check_syncbn(run).status != CheckStatus.FAIL  # no norms record here: not observed, never failed
    assert ddp.check_no_sync(run).status == CheckStatus.PASS


def test_ddp_averages_inside_backward_and_is_judged_as_before():
    run = _with_sketches(_run(sync="ddp", steps=STEPS), "ddp")
    assert contrib.judge(run)["verdicts"] == {"equal": STEPS}
    assert ddp.check_grad_sync(run).status == CheckStatus.PASS


@pytest.mark.parametrize("style", ["broadcast_rank0_grads", "broadcast_rank0_weights", "rank1_weighted_down"])
def test_rank0s_work_copied_over_the_others_is_no_synchronisation(style):
    # the old count still calls the weights' all_reduce a sync by hand: the contribution decides
    run = _with_sketches(_run(sync=None, steps=STEPS, hand=1.0), style)
    verdict = contrib.judge(run)
    assert contrib.discarded(verdict) and verdict["lost_rank"] == 1, verdict
    assert ddp.sync_kind(run) is None
    f = ddp.check_grad_sync(run)
    assert (f.status, f.key, f.params["rank"]) == (CheckStatus.FAIL, "discarded", 1)
    assert ddp.check_syncbn(run).status == CheckStatus.FAIL
    assert ddp.check_no_sync(run).status == CheckStatus.FAIL


def test_a_rank_whose_local_gradient_is_zero_did_not_train():
    run = _with_sketches(_run(sync="ddp", steps=STEPS), "idle_rank1")
    assert contrib.judge(run)["idle"] == 1
    f = ddp.check_grad_sync(run)
    assert (f.status, f.key, f.params["rank"]) == (CheckStatus.FAIL, "rank_idle", 1)
    assert ddp.check_syncbn(run).status == CheckStatus.PASS  # DDP did synchronise: only the gradient was empty


def test_a_rank_with_syncbn_and_a_zero_loss_still_shows_its_empty_last_layers():
    """SyncBatchNorm's backward hands rank 0's signal to rank 1's early layers: its norm is not zero, but the
    tensors after the last SyncBatchNorm are, at every step, while rank 0 has none."""
    run = _with_sketches(_run(sync="ddp", steps=STEPS), "ddp")
    for r, zeros in ((0, 0), (1, 2)):
        steps = next(rec for rec in run.ranks[r].records if rec["type"] == "steps")
        steps["gz"] = [zeros] * STEPS
    assert contrib.judge(run)["idle"] == 1
    assert ddp.check_grad_sync(run).key == "rank_idle"
    steps["gz"] = [2] * (STEPS // 2) + [0] * (STEPS - STEPS // 2)  # half the steps: an unused branch, not idleness
    assert contrib.judge(run)["idle"] is None


def test_runs_without_sketches_are_judged_as_before():
    assert contrib.judge(_run(sync="hand", hand=1.0)) is None
    assert ddp.check_grad_sync(_run(sync="hand", hand=1.0)).key == "ok_hand"


def test_the_harness_sketches_are_linear_in_the_gradients(tmp_path):
    """The real Observer: the applied gradient's sketch follows a change made between backward and step."""
    body = r'''
model = torch.nn.Sequential(torch.nn.Linear(6000, 3), torch.nn.Linear(3, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for scale in (1.0, 1.0, 0.5, 0.0):  # the first step shows the optimizer (no module took marked images here)
    opt.zero_grad()
    model(torch.randn(4, 6000)).sum().backward()
    for p in model.parameters():
        p.grad.mul_(scale)
    opt.step()
opt.zero_grad()
(model(torch.randn(4, 6000)).sum() * 0).backward()  # this rank's data teaches nothing: every tensor's gradient is 0
opt.step()
obs._flush_steps()
rows = [r for r in stream.recs if r["type"] == "steps"][0]
print(json.dumps({k: rows[k] for k in ("gl", "ga", "pl", "gn", "gz", "ar")}))
'''
    got = observed.last_json(tmp_path, body)
    for i, scale in enumerate((1.0, 0.5, 0.0), start=1):
        gl, ga = got["gl"][i], got["ga"][i]
        assert len(gl) == K and got["gn"][i] > 0
        assert all(abs(a - scale * b) <= 1e-7 * max(1.0, abs(b)) for a, b in zip(ga, gl)), (scale, gl, ga)
        assert len(got["pl"][i]) == K
        assert got["gz"][i] == 0  # counted when backward returned, before the script changed the gradients
    assert got["gz"][4] == 4 and got["gn"][4] == 0.0  # loss * 0: all four tensors zero


def _marked(run, firsts: dict[int, list[list[int]]], size: int):
    """``run`` with the marks each rank's model read (``seen``) and the training files' size: what the coverage
    check judges at the model. ``firsts[r]``: rank r's batches, one per step."""
    run.evidence["inputs"] = {"train_size": size}
    for r, rows in firsts.items():
        steps = next(rec for rec in run.ranks[r].records if rec["type"] == "steps")
        steps.update(seen=rows, unread=[0] * len(rows))
    return run


@pytest.mark.parametrize("style, sync, key", [("idle_rank1", "ddp", "rank_idle"),
                                               ("broadcast_rank0_weights", None, "discarded")])
def test_coverage_counts_only_the_data_of_ranks_whose_work_reached_the_update(style, sync, key):
    """Rank 1 feeds the model its half of every batch (the marks and the DataLoader say every sample was
    trained on), but its gradient is zero (``loss * 0``) or its weights are overwritten by rank 0's: only rank
    0's half moved the weights, and coverage says so with grad_sync's verdict."""
    size = 8 * STEPS  # _run's DataLoader: 4 samples a step per rank, rank r takes r::2 of them
    halves = {r: [list(range(8 * t + 4 * r, 8 * t + 4 * r + 4)) for t in range(STEPS)] for r in range(2)}
    honest = _marked(_with_sketches(_run(sync=sync, steps=STEPS, hand=1.0 if sync is None else 0.0),
                                    "ddp" if sync else "param_average"), halves, size)
    assert ddp.check_coverage(honest).status == CheckStatus.PASS
    run = _marked(_with_sketches(_run(sync=sync, steps=STEPS, hand=1.0 if sync is None else 0.0), style), halves,
                  size)
    assert ddp.check_grad_sync(run).key == key  # the contribution judge's verdict, read once by both checks
    f = ddp.check_coverage(run)
    assert (f.status, f.key, f.params["rank"]) == (CheckStatus.FAIL, key, 1), f
    assert (f.params["seen"], f.params["size"], f.params["missing"]) == (48, 96, 48)
    assert f.evidence["counted_ranks"] == [0] and f.evidence["all_ranks"]["key"] == "ok"
    assert f.evidence["contribution"] == contrib.judge(run)
    # the same run without marks (the real CIFAR-10): the DataLoader's indices of rank 0 alone are half the data
    del run.evidence["inputs"]
    f = ddp.check_coverage(run)
    assert (f.status, f.key, f.params["rank"], f.params["missing"]) == (CheckStatus.FAIL, key, 1, 48)


def test_coverage_still_passes_where_the_ranks_that_trained_fed_the_model_every_sample():
    """Rank 1 idles, but rank 0's first pass alone fed the model every sample the run trained on: nothing missed
    (the wasted rank costs grad_sync and the work share, not coverage)."""
    whole = [list(range(4 * t, 4 * t + 4)) for t in range(STEPS)]
    run = _marked(_with_sketches(_run(sync="ddp", steps=STEPS), "idle_rank1"), {0: whole, 1: whole}, 4 * STEPS)
    f = ddp.check_coverage(run)
    assert (f.status, f.key, f.evidence["counted_ranks"]) == (CheckStatus.PASS, "ok_at_model", [0]), f


def test_coverage_keeps_the_data_of_ranks_that_trained_replicas_of_their_own():
    """A model never wrapped in DDP (sample bug_no_ddp_wrap): each rank steps its own gradient and keeps its own
    weights, so the judge finds every step "discarded", but nothing was thrown away in a shared model: the ranks'
    models differ, grad_sync fails for it, and coverage keeps its verdict on the data each rank fed."""
    halves = {r: [list(range(8 * t + 4 * r, 8 * t + 4 * r + 4)) for t in range(STEPS)] for r in range(2)}
    run = _marked(_with_sketches(_run(sync=None, steps=STEPS, hand=0.0), "broadcast_rank0_weights"), halves, 8 * STEPS)
    assert ddp.check_coverage(run).status == CheckStatus.FAIL  # one shared model: rank 1's data was overwritten
    run.ranks[1].first("finished")["digest"] = "e"  # ... but here each rank ended with a model of its own
    f = ddp.check_coverage(run)
    assert f.status == CheckStatus.PASS and "counted_ranks" not in f.evidence, f

