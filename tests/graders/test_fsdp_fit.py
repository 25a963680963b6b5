"""fsdp_fit decisions without torchrun: run plan, simulated card, analytic stages, and every
check over hand-written harness records, rendered through the assignment's own messages."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from coursework.report import CheckStatus
from graders.fsdp_fit import grader as fsdp_fit
from graders.fsdp_fit import checkpoint
from graders.fsdp_fit import checks as fsdp
from graders.torchrun import RankStream, TorchrunRun

ROOT = Path(__file__).resolve().parents[2]
CFG = json.loads((ROOT / "assignments/fsdp_fit/assignment.json").read_text(encoding="utf-8"))
MB = 1_000_000
CAP = 168 * MB  # the small size's simulated card, rounded


def make_run(per_rank: dict[int, list[dict]], finished: bool = True, nproc: int = 2) -> TorchrunRun:
    ranks = {}
    for r, records in per_rank.items():
        recs = list(records) + ([{"type": "finished", "steps": 4}] if finished else [])
        ranks[r] = RankStream(r, recs)
    result = SimpleNamespace(returncode=0, timed_out=False, wall_s=1.0, killed_reason=None, layers=[])
    return TorchrunRun(nproc=nproc, result=result, ranks=ranks, stacks={}, logs={}, tampering=[])


def model_rec(fsdp2=(), fsdp1=(), ddp=False, global_params=12_000_000, local_bytes=24 * MB) -> dict:
    return {"type": "fsdp_model", "class": "GPT", "fsdp2_units": list(fsdp2), "fsdp1_units": list(fsdp1),
            "n_units": len(fsdp2) + len(fsdp1), "ddp": ddp, "global_params": global_params, "element_size": 4,
            "local_param_bytes": local_bytes}


def per_block(reshard=True, blocks=6) -> list[dict]:
    root = {"name": "(root)", "params": 1_700_000, "reshard_after_forward": True, "api": "fully_shard"}
    return [root] + [{"name": f"blocks.{i}", "params": 1_770_000, "reshard_after_forward": reshard,
                      "api": "fully_shard"} for i in range(blocks)]


def mem(peak, params=24 * MB, grads=24 * MB, opt=48 * MB, step=2) -> dict:
    return {"type": "fsdp_mem", "params": params, "grads": grads, "optimizer": opt, "peak": peak,
            "live": params + opt, "step": step}


def render(check_id: str, finding) -> dict:
    """Render with the assignment's data: a missing placeholder raises here, not in production."""
    return fsdp_fit.result_of(CFG["checks"][check_id], check_id, finding).to_dict()


EST = fsdp_fit.estimates(12_232_704, 2, "fp32", "adamw")


# -- plan, card, stages ----------------------------------------------------------
@pytest.mark.parametrize("mode,gpus,main,baseline,reason", [
    ("cpu", 0, True, True, None),
    ("gpu", 0, False, False, "no GPU"),
    ("gpu", 1, False, True, "1 GPU(s); 2 are needed"),
    ("gpu", 2, True, True, None),
])
def test_run_plan(mode, gpus, main, baseline, reason):
    plan = fsdp_fit.run_plan(mode, 2, gpus, baseline=True)
    assert (plan["main"], plan["baseline"]) == (main, baseline)
    assert (reason is None) == (plan["reason"] is None)
    if reason:
        assert reason in plan["reason"]["en"] and "GPU" in plan["reason"]["zh"]


def test_card_scales_with_the_model():
    card = CFG["card"]
    assert fsdp_fit.capacity_bytes(card, card["reference_params"]) == 15 * 2 ** 30
    small = fsdp_fit.capacity_bytes(card, CFG["size_params"]["small"])
    assert small == pytest.approx(15 * 2 ** 30 * 12_232_704 / 1_174_470_656)


def test_the_line_falls_between_no_sharding_and_full_shard():
    """The homework's premise, for every size: 16 B/param does not fit, full_shard on 2 cards does."""
    for size, params in CFG["size_params"].items():
        cap = fsdp_fit.capacity_bytes(CFG["card"], params)
        est = fsdp_fit.estimates(params, CFG["nproc"], CFG["precision"], CFG["optimizer"])
        assert est[0]["total_bytes"] == 16 * params
        assert est[0]["total_bytes"] > cap > est[3]["total_bytes"] == 8 * params, size


def test_size_params_match_the_starter(monkeypatch):
    """Sizes and batches as the grader's config has them; under grading the data set is the one epoch the grader
    asks for (its samples all distinct in content, so two ranks that share a row shared a sample)."""
    spec = importlib.util.spec_from_file_location("fsdp_starter", ROOT / "assignments/fsdp_fit/starter/model.py")
    model = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = model  # dataclasses look their module up while the class is built
    spec.loader.exec_module(model)
    assert {k: s.params for k, s in model.SIZES.items()} == CFG["size_params"]
    tiny = model.build_model("tiny")
    assert sum(p.numel() for p in tiny.parameters()) == CFG["size_params"]["tiny"]
    assert all(isinstance(b, model.Block) for b in tiny.blocks)
    x, y = model.make_dataset("tiny")[3]
    assert x.dtype == y.dtype and x.shape == y.shape and (x[1:] == y[:-1]).all()
    assert CFG["batch_size"] == {k: s.batch_size for k, s in model.SIZES.items()}
    assert len(model.make_dataset("tiny")) == 4096
    for size, steps in ((CFG["sizes"][m], CFG["steps"][m]) for m in ("fast", "cpu", "gpu")):
        n = CFG["batch_size"][size] * steps * CFG["nproc"]
        monkeypatch.setenv("DISTGRADE_DATA_LEN", str(n))
        data = model.make_dataset(size)
        assert len(data) == n and len({bytes(data[i][0].numpy()) for i in range(n)}) == n
    monkeypatch.setenv("DISTGRADE_DATA_LEN", "1e9")
    assert len(model.make_dataset("tiny")) == 4096


# -- checks ----------------------------------------------------------------------
def test_fit_and_over_with_breakdown():
    fits = fsdp.check_fit(make_run({0: [mem(130 * MB)], 1: [mem(120 * MB)]}), CAP, "T4")
    assert fits.status == CheckStatus.PASS and fits.params["rank"] == 0
    assert fits.params["other"] == fsdp.fmt_bytes(130 * MB - 96 * MB)
    over = fsdp.check_fit(make_run({0: [mem(150 * MB)], 1: [mem(210 * MB, step=1), mem(200 * MB)]}), CAP, "T4")
    assert over.status == CheckStatus.FAIL and over.key == "over" and over.params["rank"] == 1
    assert "does not fit" in render("memory.fit", over)["message"]["en"].lower()


def test_a_peak_below_the_states_of_its_step_is_a_contradiction():
    """Plain DDP trained in a thread the counter missed: a peak of 0 B beside 96 MB of states."""
    thread = make_run({0: [mem(0, step=1), mem(0)], 1: [mem(0)]})
    f = fsdp.check_fit(thread, CAP, "T4")
    assert (f.status, f.key, f.params["rank"], f.params["states"]) == (CheckStatus.FAIL, "contradiction", 0, "96.0 MB")
    assert "contradict" in render("memory.fit", f)["message"]["en"]
    # on a GPU host a CPU-offloaded state is not on the card: only the measured part is compared
    offload = {**mem(30 * MB), "measured": 24 * MB}
    assert fsdp.check_fit(make_run({0: [offload], 1: [offload]}), CAP, "T4").key == "fits"


def test_sharding_evidence_comes_from_the_module_that_trained():
    decoy = {**model_rec(per_block()), "root": 0}
    ddp_model = {**model_rec(ddp=True, local_bytes=48 * MB), "root": 1}
    trained = {**mem(130 * MB), "root": 1}
    f = fsdp.check_sharded(make_run({0: [decoy, ddp_model, trained]}), 2, EST)
    assert (f.status, f.key) == (CheckStatus.FAIL, "ddp")
    assert fsdp.check_wrap_units(make_run({0: [decoy, ddp_model, trained]}), 0.5).status == CheckStatus.FAIL
    # several roots and no step that names one: which learned is unknown, and that counts against the run
    assert fsdp.check_sharded(make_run({0: [decoy, ddp_model]}), 2, EST).key == "no_model"
    # a step naming a root nobody described (more roots than the harness keeps)
    assert fsdp.check_sharded(make_run({0: [decoy, {**mem(1), "root": 16}]}), 2, EST).key == "no_model"


def test_fit_mentions_the_one_card_run():
    base = make_run({0: [mem(230 * MB, params=49 * MB, grads=49 * MB, opt=98 * MB)]}, nproc=1)
    f = fsdp.check_fit(make_run({0: [mem(130 * MB)], 1: [mem(130 * MB)]}), CAP, "T4", base)
    assert f.key == "fits_baseline"
    assert "230 MB" in render("memory.fit", f)["message"]["en"]


def test_oom_is_explained_with_its_numbers():
    oom = {"type": "fsdp_oom", "step": 1, "capacity": 15 * 2 ** 30, "allocated": 15_900_000_000,
           "message": "CUDA out of memory. Tried to allocate 4.38 GiB. GPU 0 has ...",
           "states": {"params": 4_700_000_000, "grads": 4_700_000_000, "optimizer": 4_700_000_000}}
    exc = {"type": "exception", "exc_type": "OutOfMemoryError", "message": oom["message"], "step": 1}
    run = make_run({0: [oom, exc]}, finished=False, nproc=1)
    f = fsdp.check_run(run, "T4")
    msg = render("run.distributed", f)["message"]["en"]
    assert f.key == "oom" and "4.38 GiB" in msg and "15.9 GB" in msg and "16.1 GB" in msg and "4.70 GB" in msg
    assert fsdp.check_fit(run, 15 * 2 ** 30, "T4").key == "oom"


@pytest.mark.parametrize("record,status,key", [
    (model_rec(per_block()), CheckStatus.PASS, "ok"),
    (model_rec(per_block(reshard=False)), CheckStatus.WARN, "grad_op"),
    (model_rec(ddp=True, local_bytes=48 * MB), CheckStatus.FAIL, "ddp"),
    (model_rec(local_bytes=48 * MB), CheckStatus.FAIL, "none"),
    (model_rec(fsdp1=[{"name": "(root)", "params": 12_000_000, "strategy": "NO_SHARD"}], local_bytes=48 * MB),
     CheckStatus.FAIL, "no_shard"),
    (model_rec(fsdp1=[{"name": "(root)", "params": 1_000_000, "strategy": "FULL_SHARD"}] +
               [{"name": f"b{i}", "params": 1_833_333, "strategy": "FULL_SHARD"} for i in range(6)]),
     CheckStatus.PASS, "ok"),
    (model_rec(per_block(), local_bytes=47 * MB), CheckStatus.FAIL, "replicated"),
    # blocks wrapped, the root never: its embeddings and final norm are in no unit, whole on every rank
    (model_rec(per_block()[1:], global_params=12_320_000, local_bytes=25 * MB), CheckStatus.WARN, "outside_units"),
])
def test_sharded(record, status, key):
    f = fsdp.check_sharded(make_run({0: [record]}), 2, EST)
    assert (f.status, f.key) == (status, key)
    render("fsdp.sharded", f)


def test_grad_op_warning_says_what_it_costs():
    f = fsdp.check_sharded(make_run({0: [model_rec(per_block(reshard=False))]}), 2, EST)
    assert f.params["extra"] == fsdp.fmt_bytes(4 * 12_232_704 / 2)  # full weights minus their shard


def test_wrap_units():
    one = model_rec([{"name": "(root)", "params": 12_000_000, "reshard_after_forward": True, "api": "fully_shard"}])
    f = fsdp.check_wrap_units(make_run({0: [one, mem(190 * MB)]}), 0.5)
    assert f.status == CheckStatus.WARN and f.params["peak"] == "190 MB"
    assert "gathers every parameter" in render("fsdp.wrap_units", f)["message"]["en"]
    assert fsdp.check_wrap_units(make_run({0: [model_rec(per_block()), mem(1)]}), 0.5).status == CheckStatus.PASS
    # plain DDP in the FSDP homework: nothing to credit, a fail with 0 points (not a skip that lowers the total)
    assert fsdp.check_wrap_units(make_run({0: [model_rec(ddp=True)]}), 0.5).status == CheckStatus.FAIL


def test_a_ddp_replica_beside_a_sharded_decoy_is_not_sharded():
    """The step names the decoy (as a harness that picked the busier root would), but DDP wrapped a model of the
    same size, or another root that trained is whole on the rank: the model that learned is not sharded."""
    decoy = {**model_rec(per_block()), "root": 0}
    step = {**mem(130 * MB), "root": 0}
    ddp_rec = {"type": "ddp", "parameters": 12_000_000, "batchnorm": 0, "syncbatchnorm": 0, "device": "cpu"}
    f = fsdp.check_sharded(make_run({0: [decoy, ddp_rec, step]}), 2, EST)
    assert (f.status, f.key) == (CheckStatus.FAIL, "ddp_beside")
    assert "distributeddataparallel" in render("fsdp.sharded", f)["message"]["en"].lower()
    assert fsdp.check_wrap_units(make_run({0: [decoy, ddp_rec, step]}), 0.5).key == "not_fsdp"
    plain = {**model_rec(local_bytes=48 * MB), "root": 1}
    both = {**step, "trained": [0, 1]}
    assert fsdp.check_sharded(make_run({0: [decoy, plain, both]}), 2, EST).key == "ddp_beside"
    # a small DDP helper, or a plain root that did not train, takes nothing from the sharded model
    small = {**ddp_rec, "parameters": 10_000}
    assert fsdp.check_sharded(make_run({0: [decoy, small, plain, {**step, "trained": [0]}]}), 2, EST).key == "ok"


def test_memory_counted_with_the_counter_switched_off_is_unreadable():
    blind = {"type": "fsdp_blind", "step": 3, "where": "GPT"}
    f = fsdp.check_fit(make_run({0: [mem(60 * MB)], 1: [mem(60 * MB), blind]}), CAP, "T4")
    assert (f.status, f.key, f.params["rank"], f.params["where"]) == (CheckStatus.FAIL, "blind", 1, "GPT")
    msg = render("memory.fit", f)["message"]
    assert "switched off" in msg["en"] and "GPT" in msg["zh"]
    # with nothing measured at all it is still the script's doing, not a skip
    assert fsdp.check_fit(make_run({0: [blind]}), CAP, "T4").key == "blind"


def reported(losses):
    """The loss of each step's last backward, as the generic ``steps`` record has it: the script chooses it."""
    return {"type": "steps", "t": list(range(len(losses))), "samples": [1] * len(losses), "loss": losses,
            "backwards": [1] * len(losses), "buckets": [0] * len(losses), "synced": [0] * len(losses),
            "bucket_bytes": [0] * len(losses)}


def steps(losses, rank: int = 0, rows=None, out_grad=1.0, grads_left=False) -> list[dict]:
    """One step record per loss the model itself gave (the harness's reading of its output), with the digests of
    the rows the model took (two of the rank's own per step, unless ``rows`` gives each step's), the gradient that
    reached its outputs and whether the last step's gradients were still there at the step's first backward."""
    rows = rows or [[f"{rank:02x}{i:04x}a0a0a0", f"{rank:02x}{i:04x}b0b0b0"] for i in range(len(losses))]
    return [{**mem(100 * MB, step=i + 1), "model_loss": v, "model_forwards": 1, "rows": rows[i], "out_grad": out_grad,
             "grads_left": grads_left if i else None} for i, v in enumerate(losses)]


def test_progress():
    opt_ok = {"type": "fsdp_optimizer", "params": 100, "in_model": 100, "with_grad": 100, "model_params": 100}
    end = {"type": "fsdp_end", "sum_before": 10.0, "sum_after": 11.0}
    ok = fsdp.check_progress(make_run({0: [opt_ok, *steps([7, 6.5, 4, 3]), end], 1: steps([7, 6, 4, 3], rank=1)}), 0.05)
    assert ok.status == CheckStatus.PASS
    render("train.progress", ok)
    stale = {**opt_ok, "in_model": 0, "with_grad": 0}
    f = fsdp.check_progress(make_run({0: [stale, *steps([7, 7, 7, 7]), {**end, "sum_after": 10.0}]}), 0.05)
    assert f.key == "stale_optimizer" and "before wrapping" in render("train.progress", f)["message"]["en"]
    flat = fsdp.check_progress(make_run({0: [opt_ok, *steps([7, 7, 7, 6.9]), end]}), 0.05)
    assert flat.key == "flat"
    same = fsdp.check_progress(make_run({0: [opt_ok, *steps([7, 6, 5, 4]), {**end, "sum_after": 10.0}]}), 0.05)
    assert same.key == "unchanged"


def test_progress_reads_the_models_own_loss_not_the_scripts():
    """lr 1e-6 and the loss handed to backward scaled by 0.5^step: the script's loss halves every step, the
    model's own is flat. Steps whose model loss could not be read count against the run."""
    opt_ok = {"type": "fsdp_optimizer", "params": 100, "in_model": 100, "with_grad": 100, "model_params": 100}
    end = {"type": "fsdp_end", "sum_before": 10.0, "sum_after": 10.00001}
    scaled = make_run({0: [opt_ok, reported([6.9, 3.45, 1.7, 0.86]), *steps([6.93, 6.93, 6.93, 6.93]), end]})
    f = fsdp.check_progress(scaled, 0.05)
    assert (f.status, f.key, f.params["first"], f.params["last"]) == (CheckStatus.FAIL, "flat", "6.930", "6.930")
    assert "own loss" in render("train.progress", f)["message"]["en"]
    unread = make_run({0: [opt_ok, reported([7, 6, 4, 3]), *steps([7, None, None, None]), end]})
    f = fsdp.check_progress(unread, 0.05)
    assert (f.status, f.key) == (CheckStatus.FAIL, "no_model_loss")
    assert "never the number the script prints" in render("train.progress", f)["message"]["en"]


OPT_OK = {"type": "fsdp_optimizer", "params": 100, "in_model": 100, "with_grad": 100, "model_params": 100}
END = {"type": "fsdp_end", "sum_before": 10.0, "sum_after": 11.0}


def two_ranks(rank0: dict | None = None, rank1: dict | None = None, losses=(7, 6.5, 4, 3)):
    return make_run({0: [OPT_OK, *steps(list(losses), 0, **(rank0 or {})), END],
                     1: steps(list(losses), 1, **(rank1 or {}))})


def test_a_falling_loss_does_not_hide_what_the_ranks_fed_and_sent_into_the_model():
    """Read at the trained module by the harness: the same rows on both ranks in the same steps (no sampler: 12 of
    15 points), one batch again and again (0), a rank whose backward sent no gradient (0), gradients left over
    from the last step (zero_grad forgotten: 10 of 15). Chance or a sampler's padding (one shared row) is fine."""
    shared = [[f"{i:04x}c0c0c0c0", f"{i:04x}d0d0d0d0"] for i in range(4)]
    f = fsdp.check_progress(two_ranks({"rows": shared}, {"rows": shared}), 0.05)
    assert (f.status, f.key, f.params["shared"], f.params["of"]) == (CheckStatus.WARN, "same_inputs", 8, 8)
    got = render("train.progress", f)
    assert got["points"] == 3 and "same samples" in got["message"]["en"] and "DistributedSampler" in got["hint"]["en"]
    one_row = [["0000aaaaaaaa", f"{i:04x}eeeeeeee"] for i in range(4)]
    assert fsdp.check_progress(two_ranks(rank1={"rows": one_row}), 0.05).status == CheckStatus.PASS
    again = [["0000aaaaaaaa", "0000bbbbbbbb"]] * 4
    f = fsdp.check_progress(two_ranks(rank1={"rows": again}), 0.05)
    assert (f.status, f.key, f.params["rank"], f.params["distinct"]) == (CheckStatus.FAIL, "one_batch", 1, 2)
    assert "same batch" in render("train.progress", f)["message"]["en"]
    f = fsdp.check_progress(two_ranks(rank1={"out_grad": 0.0}), 0.05)
    assert (f.status, f.key, f.params["rank"]) == (CheckStatus.FAIL, "idle_rank", 1)
    assert "rank 1" in render("train.progress", f)["message"]["en"]
    f = fsdp.check_progress(two_ranks({"grads_left": True}), 0.05)
    assert (f.status, f.key, f.params["piled"], f.params["steps"]) == (CheckStatus.WARN, "grads_piled", 3, 3)
    got = render("train.progress", f)
    assert got["points"] == 5 and "zero_grad" in got["message"]["en"] and "zero_grad" in got["message"]["zh"]


def test_a_rank_whose_loss_is_weighted_down_by_rank_barely_trained():
    """Rank 1 backpropagates loss * 0.005: above the idle bar (1e-3 of the busiest rank), far below what any correct
    run shows (every rank backpropagates the same loss, so the totals differ only by the data). A rank sending 0.3 of
    the busiest's (a batch three times smaller, say) is not judged here."""
    f = fsdp.check_progress(two_ranks(rank1={"out_grad": 0.005}), 0.05)
    assert (f.status, f.key, f.params["rank"], f.params["share"]) == (CheckStatus.FAIL, "rank_scaled", 1, "0.005")
    got = render("train.progress", f)
    assert got["points"] == 0 and "0.005" in got["message"]["en"] and "0.005" in got["message"]["zh"]
    assert "by rank" in got["hint"]["en"]
    assert fsdp.check_progress(two_ranks(rank1={"out_grad": 0.3}), 0.05).status == CheckStatus.PASS
    assert fsdp.check_progress(two_ranks(rank1={"out_grad": 0.0}), 0.05).key == "idle_rank"


def test_inputs_or_gradients_the_harness_could_not_read_count_against_the_run():
    """No rows on a rank's steps: nothing shows the data was split. No gradient reading on a rank while the other
    has one: no contribution of that rank is shown."""
    f = fsdp.check_progress(two_ranks(rank1={"rows": [[]] * 4}), 0.05)
    assert (f.status, f.key, f.params["rank"]) == (CheckStatus.WARN, "inputs_unread", 1)
    assert render("train.progress", f)["points"] == 3
    f = fsdp.check_progress(two_ranks(rank1={"out_grad": None}), 0.05)
    assert (f.status, f.key) == (CheckStatus.FAIL, "idle_rank")


def test_ranks_that_each_walk_the_whole_data_set_are_caught_within_an_epoch_of_the_graders_data():
    """The grader's data set is one epoch of the graded run (8 samples, 4 a rank): a DistributedSampler hands each
    sample to one rank only, so any sample both ranks fed within their first 4 rows shows the data was not split
    (no sampler and a shuffle seeded by the rank, or DistributedSampler(seed=rank): 12 of 15 points), in any steps.
    A correct sampler's second epoch reshuffles (rank 0's epoch-2 rows meet rank 1's epoch-1 rows) and without
    set_epoch repeats each rank's own rows: neither is a finding. Rows read in fast mode from the samples."""
    sample = [f"{i:02x}5a5a5a5a5a" for i in range(8)]  # digests of the 8 samples' contents, all distinct
    walk0 = [[sample[i]] for i in (5, 2, 7, 0)]  # seed 1000: rank 0's whole-set shuffle
    walk1 = [[sample[i]] for i in (3, 6, 1, 2)]  # seed 1001: shares sample 2 with rank 0, two steps apart
    f = fsdp.check_progress(two_ranks({"rows": walk0}, {"rows": walk1}), 0.05, epoch_rows=4)
    assert (f.status, f.key, f.params["shared"], f.params["of"], f.params["epoch"]) == (
        CheckStatus.WARN, "not_split", 1, 4, 4)
    got = render("train.progress", f)
    assert got["points"] == 3 and "not split" in got["message"]["en"] and "not split" in got["message"]["zh"]
    assert "same seed on every rank" in got["hint"]["en"] and "DistributedSampler" in got["hint"]["zh"]
    assert fsdp.check_progress(two_ranks({"rows": walk0}, {"rows": walk1}), 0.05).status == CheckStatus.PASS  # step by step
    # a correct sampler, two micro-batches a step: epoch 1 in steps 1-2, epoch 2 (reshuffled) in steps 3-4
    split0 = [[sample[5], sample[0]], [sample[3], sample[6]], [sample[1], sample[7]], [sample[0], sample[4]]]
    split1 = [[sample[2], sample[1]], [sample[7], sample[4]], [sample[5], sample[6]], [sample[2], sample[3]]]
    assert fsdp.check_progress(two_ranks({"rows": split0}, {"rows": split1}), 0.05, epoch_rows=4).status == CheckStatus.PASS
    # no set_epoch: each rank's epoch 2 repeats its epoch 1, half of its rows distinct, and that is a whole epoch
    again0, again1 = split0[:2] * 2, split1[:2] * 2
    assert fsdp.check_progress(two_ranks({"rows": again0}, {"rows": again1}), 0.05, epoch_rows=4).status == CheckStatus.PASS
    one = [[sample[0]]] * 4  # one batch memorised is still one
    f = fsdp.check_progress(two_ranks({"rows": one}, {"rows": walk1}), 0.05, epoch_rows=4)
    assert (f.status, f.key, f.params["distinct"]) == (CheckStatus.FAIL, "one_batch", 1)
    # a step the harness cut at 64 rows ends the window: what follows may be the next epoch's
    cut0 = [[f"{i:03x}0a0a0a0a0" for i in range(64)], [sample[0]], [sample[1]], [sample[2]]]
    cut1 = [[f"{i:03x}1b1b1b1b1" for i in range(64)], [sample[0]], [sample[3]], [sample[4]]]
    cut = fsdp.check_progress(two_ranks({"rows": cut0}, {"rows": cut1}), 0.05, epoch_rows=128)
    assert cut.status == CheckStatus.PASS
    whole = [cut0[0][:63], *cut0[1:]], [cut1[0][:63], *cut1[1:]]  # not cut: sample 0 is within the epoch
    assert fsdp.check_progress(two_ranks({"rows": whole[0]}, {"rows": whole[1]}), 0.05, epoch_rows=128).key == "not_split"
    f = fsdp.check_progress(two_ranks(rank1={"rows": [[]] * 4}), 0.05, epoch_rows=4)  # unread: against, as before
    assert (f.status, f.key) == (CheckStatus.WARN, "inputs_unread")


def _epoch(rank: int, indices: list[int], local_len: int, loader: int = 1, complete: bool = True) -> dict:
    """The harness's DataLoader record of one epoch (``distgrade_harness.hooks``): the samples it handed out."""
    return {"type": "epoch", "loader": loader, "epoch": 0, "kind": "map", "complete": complete,
            "batches": len(indices), "batch_size": 1, "indices": indices, "sampler": "DistributedSampler",
            "dataset_len": 8, "local_len": local_len}


def test_a_validation_split_held_back_is_no_unsplit_data():
    """A tenth held back with random_split: 7 of the 8 samples train, so the DistributedSampler pads with one repeated
    sample (one row both ranks feed) and each rank's epoch is 4 rows; with 22 of 24 and drop_last, a rank's epoch
    is 10 rows, and the eleventh and twelfth are the next epoch's, reshuffled. The window is the epoch the rank's
    training loader handed out, and a padding row per rank pair is allowed where the split does not divide."""
    sample = [f"{i:02x}5a5a5a5a5a" for i in range(24)]
    padded0 = [[sample[i]] for i in (3, 5, 0, 6)]
    padded1 = [[sample[i]] for i in (1, 4, 2, 3)]  # sample 3 is the sampler's padding: on both ranks
    run = two_ranks({"rows": padded0}, {"rows": padded1})
    run.ranks[0].records.append(_epoch(0, [3, 5, 0, 6], 7))
    run.ranks[1].records.append(_epoch(1, [1, 4, 2, 3], 7))
    assert fsdp.check_progress(run, 0.05, epoch_rows=4).status == CheckStatus.PASS
    bare = two_ranks({"rows": padded0}, {"rows": padded1})  # no DataLoader record: the grader's epoch, no padding
    assert fsdp.check_progress(bare, 0.05, epoch_rows=4).key == "not_split"
    # CPU mode: 12 rows a rank, the training part 22 of 24, batches of 2 with drop_last: 10 rows an epoch
    first0, first1 = list(range(0, 20, 2)), list(range(1, 20, 2))
    rows0 = [[sample[a], sample[b]] for a, b in zip(first0[::2], first0[1::2])] + [[sample[1], sample[20]]]
    rows1 = [[sample[a], sample[b]] for a, b in zip(first1[::2], first1[1::2])] + [[sample[0], sample[21]]]
    cpu = two_ranks({"rows": rows0}, {"rows": rows1}, losses=(7, 6.5, 6, 5, 4.5, 3))
    cpu.ranks[0].records.append(_epoch(0, first0, 22))
    cpu.ranks[1].records.append(_epoch(1, first1, 22))
    assert fsdp.check_progress(cpu, 0.05, epoch_rows=12).status == CheckStatus.PASS
    # the whole set walked by every rank is still caught with its loader's record: 8 samples, no padding
    walk0, walk1 = [[sample[i]] for i in (5, 2, 7, 0)], [[sample[i]] for i in (3, 6, 1, 2)]
    walked = two_ranks({"rows": walk0}, {"rows": walk1})
    walked.ranks[0].records.append({**_epoch(0, [5, 2, 7, 0, 1, 3, 4, 6], 8), "sampler": "RandomSampler"})
    walked.ranks[1].records.append({**_epoch(1, [3, 6, 1, 2, 0, 4, 5, 7], 8), "sampler": "RandomSampler"})
    assert fsdp.check_progress(walked, 0.05, epoch_rows=4).key == "not_split"


def test_progress_fails_when_part_of_the_model_never_trained():
    """An optimizer built before fully_shard(model): 96 of 100 tensors are the model's, the other 4 never change."""
    opt = {"type": "fsdp_optimizer", "params": 100, "in_model": 96, "with_grad": 96, "model_params": 100}
    end = {"type": "fsdp_end", "sum_before": 10.0, "sum_after": 11.0, "stale": 4, "checked": 100,
           "stale_names": ["tok.weight", "pos.weight", "ln.weight", "ln.bias"]}
    f = fsdp.check_progress(make_run({0: [opt, *steps([7, 6.5, 4, 3]), end]}), 0.05)
    assert (f.status, f.key) == (CheckStatus.FAIL, "partly_stale")
    msg = render("train.progress", f)
    assert "not in the optimizer" in msg["message"]["en"] and "tok.weight" in msg["message"]["zh"]
    assert "fully_shard" in msg["hint"]["en"]


def test_every_optimizer_counts_and_a_model_updated_by_hand_trained():
    """A decoy's optimizer steps first and holds none of the model's parameters; the model changed anyway."""
    decoy_opt = {"type": "fsdp_optimizer", "params": 100, "in_model": 0, "with_grad": 100, "model_params": 100}
    end = {"type": "fsdp_end", "sum_before": 10.0, "sum_after": 11.0, "stale": 0, "checked": 100}
    f = fsdp.check_progress(make_run({0: [decoy_opt, *steps([7, 6.5, 4, 3]), end]}), 0.05)
    assert f.status == CheckStatus.PASS
    real = {**decoy_opt, "in_model": 100}
    assert fsdp.check_progress(make_run({0: [decoy_opt, real, *steps([7, 6.5, 4, 3]), end]}), 0.05).params["in_model"] == 100


def save(nbytes, devices=("cpu",), sharded=0):
    return {"type": "fsdp_save", "step": 4, "tensors": 100, "bytes": nbytes, "sharded": sharded,
            "devices": list(devices)}


SHARDS = {0: [save(24 * MB, sharded=100)], 1: [save(24 * MB, sharded=100)]}
DCP = {0: [{"type": "fsdp_dcp", "call": "save"}], 1: [{"type": "fsdp_dcp", "call": "save"}]}


def left(ranks: dict[int, list[str]], unclaimed=()) -> dict:
    """The grader's listing of the files the run left (``graders.evidence.files.created_files``)."""
    return {"files": {"ranks": ranks, "checkpoints": ranks, "unclaimed": [list(u) for u in unclaimed]}}


@pytest.mark.parametrize("per_rank,mode,files,status,key", [
    ({0: [save(49 * MB)], 1: []}, "cpu", {}, CheckStatus.PASS, "rank0_cpu"),
    ({0: [save(49 * MB)], 1: [save(49 * MB)]}, "cpu", {}, CheckStatus.WARN, "every_rank"),
    ({0: [save(49 * MB, devices=("cuda",))], 1: []}, "gpu", {}, CheckStatus.WARN, "on_card"),
    ({0: [{"type": "fsdp_state_dict", "full_state_dict": True, "cpu_offload": False}, save(49 * MB)], 1: []},
     "cpu", {}, CheckStatus.WARN, "on_card"),
    (SHARDS, "cpu", left({0: ["ckpt.pt.rank0"], 1: ["ckpt.pt.rank1"]}), CheckStatus.PASS, "shards"),
    (SHARDS, "cpu", left({0: ["ckpt.pt"]}, [("shard_r1.pt", 1)]), CheckStatus.PASS, "shards"),  # unseen writer
    # every rank wrote the same path: one rank's half is left, nobody's own file
    (SHARDS, "cpu", left({0: ["ckpt.pt"], 1: ["ckpt.pt"]}), CheckStatus.FAIL, "shards_lost"),
    (SHARDS, "cpu", {}, CheckStatus.FAIL, "shards_lost"),  # saved, then removed (or nothing listed)
    ({0: [save(24 * MB, sharded=100)], 1: []}, "cpu", left({0: ["ckpt.pt"]}), CheckStatus.FAIL, "shards_lost"),
    (DCP, "cpu", left({0: ["ckpt.dcp/__0_0.distcp"], 1: ["ckpt.dcp/__1_0.distcp"]}), CheckStatus.FAIL,
     "dcp_no_metadata"),
    ({0: [], 1: []}, "cpu", {}, CheckStatus.WARN, "none"),
])
def test_checkpoint(per_rank, mode, files, status, key):
    run = make_run(per_rank)
    run.evidence.update(files)
    f = checkpoint.check_checkpoint(run, 48.9 * MB, mode)
    assert (f.status, f.key) == (status, key)
    result = render("ckpt.save", f)
    assert result["points"] == {CheckStatus.PASS: 10, CheckStatus.WARN: 5, CheckStatus.FAIL: 0}[status]
    assert result["message"]["zh"] and result["message"]["en"]


SHAPES = [["tok.weight", [1024, 256]], ["blocks.0.qkv.weight", [768, 256]], ["ln.bias", [256]]]
TRAINED = [{**model_rec(per_block(), global_params=12_000_000), "root": 0, "param_shapes": SHAPES},
           {**mem(100 * MB), "root": 0}]


def dcp_read(tensors: dict | None = None, error: str | None = None) -> dict:
    """The grader's reading of a .metadata (``graders.evidence.dcp.read_metadata``)."""
    meta = {"error": error} if error else {"tensors": tensors or {}, "other": 0}
    return {"dcp": {"checkpoints": {"ckpt.dcp/.metadata": meta}}}


NESTED = {"model.tok.weight": [1024, 256], "model.blocks.0.qkv.weight": [768, 256], "model.ln.bias": [256],
          "optim.state.tok.weight.exp_avg": [1024, 256], "optim.state.tok.weight.step": []}


@pytest.mark.parametrize("tensors,error,status,key", [
    (NESTED, None, CheckStatus.PASS, "dcp"),  # {"model": ..., "optim": ...}: keys under a prefix
    ({k.removeprefix("model."): v for k, v in NESTED.items() if k.startswith("model.")}, None, CheckStatus.PASS, "dcp"),
    ({"step": []}, None, CheckStatus.FAIL, "dcp_incomplete"),  # a step counter: no weight at all
    ({**NESTED, "model.tok.weight": [8, 8]}, None, CheckStatus.FAIL, "dcp_incomplete"),  # the name, not the tensor
    ({"optim.state.tok.weight.exp_avg": [1024, 256], "optim.state.ln.bias.exp_avg": [256],
      "optim.state.blocks.0.qkv.weight.exp_avg": [768, 256]}, None, CheckStatus.FAIL, "dcp_incomplete"),  # states only
    (None, "unreadable: UnpicklingError", CheckStatus.FAIL, "dcp_incomplete"),
])
def test_a_distributed_checkpoint_is_judged_by_what_its_metadata_lists(tensors, error, status, key):
    run = make_run({0: [*TRAINED, *DCP[0]], 1: DCP[1]})
    run.evidence.update(left({0: ["ckpt.dcp/.metadata", "ckpt.dcp/__0_0.distcp"], 1: ["ckpt.dcp/__1_0.distcp"]}))
    run.evidence.update(dcp_read(tensors, error))
    f = checkpoint.check_checkpoint(run, 48.9 * MB, "cpu")
    assert (f.status, f.key) == (status, key)
    msg = render("ckpt.save", f)["message"]
    assert msg["zh"] and msg["en"]
    if key == "dcp_incomplete":
        assert "missing" in msg["en"] and "of the 3 parameters" in msg["en"]


def test_a_distributed_checkpoint_with_only_rank_0s_chunks_fails():
    """Every parameter listed with its global shape, but the chunks written cover half of each (rank 0 called
    dcp.save alone): it cannot be loaded."""
    run = make_run({0: [*TRAINED, *DCP[0]], 1: []})
    run.evidence.update(left({0: ["ckpt.dcp/.metadata", "ckpt.dcp/__0_0.distcp"]}))
    got = dcp_read(NESTED)
    got["dcp"]["checkpoints"]["ckpt.dcp/.metadata"]["partial"] = {
        "model.tok.weight": [131072, 262144], "model.blocks.0.qkv.weight": [98304, 196608]}
    run.evidence.update(got)
    f = checkpoint.check_checkpoint(run, 48.9 * MB, "cpu")
    assert (f.status, f.key, f.params["partial"], f.params["total"]) == (CheckStatus.FAIL, "dcp_partial", 2, 3)
    msg = render("ckpt.save", f)
    assert "tok.weight" in msg["message"]["en"] and "tok.weight" in msg["message"]["zh"]
    assert "every rank" in msg["hint"]["en"]


def test_a_distributed_checkpoint_of_an_unknown_model_or_without_metadata_fails():
    unknown = make_run({0: DCP[0], 1: DCP[1]})
    unknown.evidence.update(dcp_read(NESTED))
    assert checkpoint.check_checkpoint(unknown, 48.9 * MB, "cpu").key == "dcp_unchecked"
    unread = make_run({0: [*TRAINED, *DCP[0]], 1: DCP[1]})
    unread.evidence.update(left({0: ["ckpt.dcp/.metadata"]}))  # listed, but the grader read no .metadata
    assert checkpoint.check_checkpoint(unread, 48.9 * MB, "cpu").key == "dcp_no_metadata"


def files_of(ranks: dict[int, list[str]], sizes: dict[str, int], loose=()) -> dict:
    return {"files": {"ranks": ranks, "checkpoints": ranks, "unclaimed": [], "sizes": sizes, "loose": list(loose)}}


def test_a_full_copy_another_rank_left_counts_whatever_wrote_it():
    """Rank 1 pickled its full copy (no torch.save), or wrote raw bytes under a name that says nothing."""
    pickled = make_run({0: [*TRAINED, save(49 * MB)], 1: []})
    pickled.evidence.update(files_of({0: ["ckpt.pt"], 1: ["ckpt_rank1.pkl"]}, {"ckpt.pt": 49 * MB, "ckpt_rank1.pkl": 48 * MB}))
    f = checkpoint.check_checkpoint(pickled, 48.9 * MB, "cpu")
    assert (f.status, f.key, f.params["ranks"]) == (CheckStatus.WARN, "every_rank", "0, 1")
    raw = make_run({0: [*TRAINED, save(49 * MB)], 1: []})
    raw.evidence.update(files_of({0: ["ckpt.pt"]}, {"ckpt.pt": 49 * MB}, loose=[["backup.dat", 48 * MB, 1, None]]))
    assert checkpoint.check_checkpoint(raw, 48.9 * MB, "cpu").key == "every_rank"
    # a shard with its optimizer states is as large as the model, but the rank's torch.save says it is a shard
    shard = {**save(60 * MB, sharded=100), "path": "/tmp/job/n2/work/ckpt.pt.rank1"}
    shards = make_run({0: [*TRAINED, {**save(60 * MB, sharded=100), "path": "/tmp/job/n2/work/ckpt.pt.rank0"}],
                       1: [shard]})
    shards.evidence.update(files_of({0: ["ckpt.pt.rank0"], 1: ["ckpt.pt.rank1"]},
                                    {"ckpt.pt.rank0": 60 * MB, "ckpt.pt.rank1": 60 * MB}))
    assert checkpoint.check_checkpoint(shards, 48.9 * MB, "cpu").key == "shards"
    # a small file of rank 1 (a log, a loss curve) is no copy of the model
    small = make_run({0: [*TRAINED, save(49 * MB)], 1: []})
    small.evidence.update(files_of({0: ["ckpt.pt"], 1: ["loss_rank1.npy"]}, {"ckpt.pt": 49 * MB, "loss_rank1.npy": 800}))
    assert checkpoint.check_checkpoint(small, 48.9 * MB, "cpu").key == "rank0_cpu"


def test_a_full_copy_is_counted_by_its_elements_whatever_their_dtype():
    """Every rank torch.saves a float16 copy of the whole 12M-parameter model (24 MB, half the float32 48 MB): a full
    copy on every rank all the same. Half of the model saved as a plain tensor is no full copy, whatever its dtype."""
    half = {**save(24 * MB), "elements": 12_000_000}
    f = checkpoint.check_checkpoint(make_run({0: [*TRAINED, save(49 * MB), half], 1: [half]}), 48.9 * MB, "cpu")
    assert (f.status, f.key, f.params["ranks"]) == (CheckStatus.WARN, "every_rank", "0, 1")
    wide = {**save(48 * MB), "elements": 6_000_000}  # a float64 half of the model: the bytes of the whole
    f = checkpoint.check_checkpoint(make_run({0: [*TRAINED, save(49 * MB)], 1: [wide]}), 48.9 * MB, "cpu")
    assert (f.status, f.key) == (CheckStatus.PASS, "rank0_cpu")


def test_a_full_save_is_measured_against_the_model_that_trained():
    """A 3.4M-parameter model saved whole by rank 0 is its full state dict, though the requested size is larger."""
    smaller = [{**TRAINED[0], "global_params": 3_425_792}, TRAINED[1]]
    f = checkpoint.check_checkpoint(make_run({0: [*smaller, save(13.7 * MB)], 1: []}), 26.3 * MB, "cpu")
    assert (f.status, f.key) == (CheckStatus.PASS, "rank0_cpu")


def test_the_model_that_trained_must_be_the_requested_size():
    tiny = {"size": "tiny", "params": 6_584_832}
    fits = [mem(130 * MB)]
    right = make_run({0: [{**TRAINED[0], "global_params": 6_584_832}, *fits], 1: fits})
    assert fsdp.check_fit(right, CAP, "T4", requested=tiny).key == "fits"
    untied = make_run({0: [{**TRAINED[0], "global_params": 6_847_000}, *fits], 1: fits})  # larger is fine
    assert fsdp.check_fit(untied, CAP, "T4", requested=tiny).key == "fits"
    small = make_run({0: [{**TRAINED[0], "global_params": 3_425_792}, *fits], 1: fits})
    f = fsdp.check_fit(small, CAP, "T4", requested=tiny)
    assert (f.status, f.key, f.params["trained"], f.params["requested"]) == (CheckStatus.FAIL, "wrong_size",
                                                                             "3,425,792", "6,584,832")
    msg = render("memory.fit", f)
    assert "--model-size tiny" in msg["message"]["en"] and "3,425,792" in msg["message"]["zh"]
    assert "build_model(args.model_size)" in msg["hint"]["en"]
    # two roots and no step naming either: which one trained is unknown, and that is not shown to fit
    unknown = make_run({0: [{**TRAINED[0], "root": 0}, {**TRAINED[0], "root": 1}, {k: v for k, v in fits[0].items()}],
                        1: fits})
    f = fsdp.check_fit(unknown, CAP, "T4", requested=tiny)
    assert (f.status, f.key) == (CheckStatus.FAIL, "unknown_size")
    assert render("memory.fit", f)["message"]["zh"]


def test_fmt_bytes():
    assert [fsdp.fmt_bytes(x) for x in (None, 512, 1_500_000, 134_000_000, 18_791_530_496)] == \
        ["?", "512 B", "1.50 MB", "134 MB", "18.8 GB"]


def test_the_simulated_card_is_named_in_each_messages_language():
    """The card's English label ("T4 (15 GiB, scaled to small)") was formatted into the Chinese
    messages too."""
    from graders.checks.ddp import Finding
    from graders.checks.render import render

    label = fsdp_fit.card_label(CFG["card"], "small")
    assert label["en"] == "T4 (15 GiB, scaled to small)" and "scaled" not in label["zh"] and "small" in label["zh"]
    f = Finding(CheckStatus.FAIL, "over", {"card": label, "rank": 0, "peak": "175 MiB", "capacity": "160 MiB"})
    msg = render(CFG["checks"]["memory.fit"], "memory.fit", f).message
    assert label["zh"] in msg["zh"] and "scaled to" not in msg["zh"] and label["en"] in msg["en"]


def test_a_full_checkpoint_must_hold_the_weights_that_trained():
    """Rank 0 saved a full state dict: the grader's reading of the file (its tensors' absolute sums) must add up to
    the sums of every rank's shard at the end. A fresh model of the same size and names does not; a file, a sum or
    a model that cannot be read counts against the run."""
    from graders.evidence import weights
    # the signed sums by position, one per sign pattern: [3, 0, 1, 0] in all; the L2 norm is 10
    ends = {0: {"type": "fsdp_end", "sum_before": 90.0, "sum_after": 60.0, "order": [2.0, 1.0, 1.0, -1.0],
                "squares": 50.0}, 1: {"type": "fsdp_end", "sum_after": 40.0, "order": [1.0, -1.0, 0.0, 1.0],
                                      "squares": 50.0}}
    placed = [1.0, 0.0, 1 / 3, 0.0]
    tensors = {f"model.{name}": [dims, 100.0 / len(SHAPES), placed] for name, dims in SHAPES}

    def run_with(rank0_end=ends[0], rank1_end=ends[1]):
        run = make_run({0: [*TRAINED, save(49 * MB), rank0_end], 1: [rank1_end]})
        run.evidence.update(files_of({0: ["ckpt.pt"]}, {"ckpt.pt": 49 * MB}))
        return run
    run = run_with()
    passed = checkpoint.check_checkpoint(run, 48.9 * MB, "cpu")
    assert passed.key == "rank0_cpu"
    read = {"ckpt.pt": {"tensors": tensors}}
    f = checkpoint.trained_weights(passed, run, lambda rel: read[rel])
    assert (f.status, f.key) == (CheckStatus.PASS, "rank0_cpu") and f.evidence["weights"][0]["holds"]
    fresh = {"ckpt.pt": {"tensors": {k: [d, s * 0.93, o] for k, (d, s, o) in tensors.items()}}}
    f = checkpoint.trained_weights(passed, run, lambda rel: fresh[rel])
    assert (f.status, f.key, f.params["matched"]) == (CheckStatus.FAIL, "not_trained", len(SHAPES))
    got = render("ckpt.save", f)
    assert got["points"] == 0 and "not the weights" in got["message"]["en"] and "ckpt.pt" in got["message"]["zh"]
    renamed = {"ckpt.pt": {"tensors": {f"w{i}": v for i, v in enumerate(tensors.values())}}}
    assert checkpoint.trained_weights(passed, run, lambda rel: renamed[rel]).key == "not_trained"
    broken = {"ckpt.pt": {"error": "unreadable: UnpicklingError"}}
    assert checkpoint.trained_weights(passed, run, lambda rel: broken[rel]).key == "weights_unread"
    no_sum = run_with(rank1_end={"type": "fsdp_end", "sum_after": None})
    f = checkpoint.trained_weights(passed, no_sum, lambda rel: read[rel])
    assert (f.status, f.key) == (CheckStatus.FAIL, "weights_unread")
    assert "cannot be checked" in render("ckpt.save", f)["message"]["en"]
    # the trained values with rows interleaved (shards joined on the wrong dimension): the absolute sums match,
    # the signed sums by position do not (the fourth: 3 against 0, beyond 0.05 of the L2 norm 10)
    shuffled = {"ckpt.pt": {"tensors": {k: [d, s, [1.0, 0.0, 1 / 3, 1.0]] for k, (d, s, o) in tensors.items()}}}
    f = checkpoint.trained_weights(passed, run, lambda rel: shuffled[rel])
    assert (f.status, f.key) == (CheckStatus.FAIL, "not_in_place"), f.evidence["weights"]
    got = render("ckpt.save", f)
    assert got["points"] == 0 and "not in their places" in got["message"]["en"] and "ckpt.pt" in got["message"]["zh"]
    assert (f.params["saved_order"], f.params["trained_order"]) == ("3", "0")
    rounded = {"ckpt.pt": {"tensors": {k: [d, s, [1.1, 0.1, 0.3, -0.1]] for k, (d, s, o) in tensors.items()}}}
    assert checkpoint.trained_weights(passed, run, lambda rel: rounded[rel]).key == "rank0_cpu"
    unplaced = run_with(rank1_end={"type": "fsdp_end", "sum_after": 40.0})  # no signed sum: counts against
    assert checkpoint.trained_weights(passed, unplaced, lambda rel: read[rel]).key == "weights_unread"
    shards = checkpoint.trained_weights(fsdp.Finding(CheckStatus.PASS, "shards"), run, lambda rel: broken[rel])
    assert shards.key == "shards"  # only a full state dict of rank 0's is read
    # a wrapper's prefix in the saved keys is no other parameter
    wrapped = {f"_fsdp_wrapped_module.{k}": v for k, v in tensors.items()}
    assert weights.holds_trained({"tensors": wrapped}, SHAPES, 100.0)["holds"]
    # round 6: the model trained inside a thin module of the student's (self.inner) and the inner model's state
    # dict saved: the parameters are named inner.*, the keys are not; the same weights all the same
    inner = [[f"inner.{name}", dims] for name, dims in SHAPES]
    assert weights.holds_trained({"tensors": tensors}, inner, 100.0)["holds"]
    assert not weights.holds_trained({"tensors": fresh["ckpt.pt"]["tensors"]}, inner, 100.0)["holds"]


def test_a_parameter_no_unit_shards_is_summed_on_every_rank():
    """The root left unwrapped (bug_root_not_wrapped): tok.weight and ln.bias are whole on both ranks, so the end
    sums hold them twice; the blocks' shards add up to them once."""
    blocks_only = [u for u in per_block() if u["name"] != "(root)"]
    model = {**model_rec(blocks_only, global_params=12_000_000), "root": 0, "param_shapes": SHAPES}
    sums = {"tok.weight": 30.0, "blocks.0.qkv.weight": 50.0, "ln.bias": 20.0}
    orders = {"tok.weight": 1.0, "blocks.0.qkv.weight": 2.0, "ln.bias": 0.5}  # 2 + 2 * (1 + 0.5) = 5
    tensors = {name: [dims, sums[name], [orders[name]] * 4] for name, dims in SHAPES}
    placed = {"order": [2.5] * 4, "squares": 1.0}
    run = make_run({0: [model, {**mem(100 * MB), "root": 0}, save(49 * MB),
                        {"type": "fsdp_end", "sum_after": 75.0, **placed}],
                    1: [{"type": "fsdp_end", "sum_after": 75.0, **placed}]})  # 50 + 2 * (30 + 20) = 150
    run.evidence.update(files_of({0: ["ckpt.pt"]}, {"ckpt.pt": 49 * MB}))
    passed = checkpoint.check_checkpoint(run, 48.9 * MB, "cpu")
    f = checkpoint.trained_weights(passed, run, lambda rel: {"tensors": tensors})
    assert (f.status, f.key) == (CheckStatus.PASS, "rank0_cpu"), f.evidence.get("weights")
    drifted = make_run({0: [model, {**mem(100 * MB), "root": 0}, save(49 * MB),
                            {"type": "fsdp_end", "sum_after": 75.0, **placed}],
                        1: [{"type": "fsdp_end", "sum_after": 77.0, "order": [2.7] * 4, "squares": 1.0}]})  # drifted
    drifted.evidence.update(files_of({0: ["ckpt.pt"]}, {"ckpt.pt": 49 * MB}))
    assert checkpoint.trained_weights(passed, drifted, lambda rel: {"tensors": tensors}).key == "rank0_cpu"
    fresh = {name: [dims, 0.8 * v, o] for name, (dims, v, o) in tensors.items()}  # 120 against 152: beyond any drift
    assert checkpoint.trained_weights(passed, drifted, lambda rel: {"tensors": fresh}).key == "not_trained"
