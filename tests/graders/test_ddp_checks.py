"""Pure decisions of the ddp_speedup grader: GPU plan, speedup bands, stuck collective, CIFAR layout."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from coursework import assignments
from coursework.report import CheckStatus
from graders import cifar
from graders.checks import ddp, stacks, timing
from graders.checks.render import render as _result
from graders.ddp_speedup.checks import CHECKS
from graders.ddp_speedup.grader import gpu_plan
from graders.sandbox import SandboxResult
from graders.torchrun import RankStream, TorchrunRun, failed_ranks


@pytest.mark.parametrize("mode, available, expected", [
    ("cpu", 0, (True, True, None)),
    ("gpu", 0, (False, False, {"zh": "本机没有 GPU，需要 2 块", "en": "this host has no GPU; 2 are needed"})),
    ("gpu", 1, (True, False, {"zh": "本机只有 1 块 GPU，需要 2 块", "en": "this host has 1 GPU(s); 2 are needed"})),
    ("gpu", 2, (True, True, None)),
])
def test_gpu_plan(mode, available, expected):
    assert gpu_plan(mode, 2, available) == expected


def test_stuck_in_names_the_collective():
    dump = ('Current thread 0x00007f (most recent call first):\n'
            '  File "/x/torch/distributed/c10d_logger.py", line 81 in wrapper\n'
            '  File "/x/torch/distributed/distributed_c10d.py", line 4800 in barrier\n'
            '  File "/job/code/train.py", line 70 in main\n')
    assert stacks.stuck_in(dump) == {"zh": "barrier", "en": "barrier"}


def test_synthetic_cifar_reads_like_the_real_files(tmp_path):
    folder = cifar.write_synthetic(tmp_path, per_batch=20, test_size=10)
    with open(folder / "data_batch_1", "rb") as f:
        as_bytes = pickle.load(f, encoding="bytes")
    with open(folder / "data_batch_1", "rb") as f:
        as_latin1 = pickle.load(f, encoding="latin1")
    assert as_bytes[b"data"].shape == (20, 3072) and as_bytes[b"data"].dtype.name == "uint8"
    assert (as_latin1["data"] == as_bytes[b"data"]).all() and as_latin1["labels"] == as_bytes[b"labels"]
    assert b"U\x04data" in (folder / "data_batch_1").read_bytes()  # keys are py2 str (SHORT_BINSTRING)
    assert cifar.train_size(tmp_path) == 100


# torchrun's ChildFailedError summary as torch 2.13 prints it (rank 1 aborted, rank 0 then got SIGTERM)
SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
train.py FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-02_14:02:29
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : {code0} (pid: 2051)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 2051
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_14:02:29
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : {code1} (pid: 2052)  (SIGABRT)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 2052
======================================================
"""


def _run(nproc=2, *, steps=10, finished=True, rc=0, stderr="", killed=None, pg=True, sync="ddp", digest="d",
         hand=0.0, loader=True):
    """A TorchrunRun as the channel would fill it: one epoch and ``steps`` steps per rank.

    ``pg``: the ranks formed a process group; ``sync``: "ddp" (a DDP record), "hand" (gradients
    all-reduced by hand, fraction ``hand`` per step) or None; ``loader``: data read through a DataLoader.
    """
    ranks = {}
    for r in range(nproc):
        s = RankStream(r)
        if pg:
            s.records.append({"type": "process_group", "world": nproc, "backend": "gloo"})
        if sync == "ddp":
            s.records.append({"type": "ddp", "batchnorm": 0, "syncbatchnorm": 2, "parameters": 10, "device": "cpu"})
        if steps and not loader:
            s.records.append({"type": "steps", "t": [0.1 * i for i in range(steps)], "samples": [0] * steps,
                              "loss": [1.0] * steps, "backwards": [1] * steps, "synced": [1] * steps,
                              "hand_reduced": [hand] * steps})
        elif steps:
            s.records.append({"type": "epoch", "loader": 1, "epoch": 0, "kind": "map", "complete": True,
                              "batches": steps, "batch_size": 4, "indices": list(range(r, 8 * steps, nproc)),
                              "sampler": "DistributedSampler", "dataset_len": 8 * steps, "drop_last": False})
            s.records.append({"type": "steps", "t": [0.1 * i for i in range(steps)], "samples": [4] * steps,
                              "loss": [1.0] * steps, "backwards": [1] * steps, "synced": [1] * steps,
                              "hand_reduced": [hand] * steps})
        s.records.append({"type": "prints", "count": 0, "tail": []})
        if finished:
            s.records.append({"type": "finished", "steps": steps, "digest": digest, "param_sums": [1.0],
                              "model_source": "ddp" if sync == "ddp" else "optimizer",
                              "process_group": nproc if pg else 0})
        ranks[r] = s
    result = SandboxResult(returncode=rc, timed_out=False, wall_s=1.0, stderr=stderr, killed_reason=killed)
    return TorchrunRun(nproc=nproc, result=result, ranks=ranks, stacks={}, logs={}, tampering=[])


def test_failed_ranks_are_read_from_torchruns_summary():
    assert failed_ranks(SUMMARY.format(code0=-15, code1=-6)) == {0: -15, 1: -6}
    assert failed_ranks("\x1b[31mE1202 noise\x1b[0m\n") == {}


def test_a_correct_run_passes_even_after_the_gloo_teardown_abort():
    assert ddp.check_run(_run()).status == CheckStatus.PASS
    aborted = _run(rc=1, stderr=SUMMARY.format(code0=-15, code1=-6))  # SIGABRT after the end marker
    assert ddp.check_run(aborted).status == CheckStatus.PASS


@pytest.mark.parametrize("stderr, rc, rank, code", [
    (SUMMARY.format(code0=-15, code1=1), 1, "1", 1),  # sys.exit(1) / raise SystemExit(1) after training
    (SUMMARY.format(code0=3, code1=-6), 1, "0", 3),
    ("", 1, "?", 1),  # failed, and no summary says which rank: never a pass
])
def test_a_nonzero_exit_after_the_end_marker_fails(stderr, rc, rank, code):
    f = ddp.check_run(_run(rc=rc, stderr=stderr))
    assert (f.status, f.key, f.params["rank"], f.params["code"]) == (CheckStatus.FAIL, "exit_code", rank, code)
    assert f.fallback == "died"  # graders whose assignment has no exit_code text show "died"


def test_a_run_that_did_not_train_fails_and_every_dependent_check_fails_with_the_reason():
    """The student's code caused it: a fail with 0 points that says why, never a skip that lowers the total."""
    idle = _run(steps=0)
    f = ddp.check_run(idle)
    assert (f.status, f.key) == (CheckStatus.FAIL, "no_training")
    for check in (ddp.check_disjoint, ddp.check_coverage, ddp.check_reshuffle, ddp.check_grad_sync,
                  ddp.check_syncbn, ddp.check_no_sync, lambda r: ddp.check_rank0_io(r, 2, 3)):
        got = check(idle)
        assert (got.status, got.key) == (CheckStatus.FAIL, "no_training"), check


def test_no_training_findings_render_with_zero_points():
    a = assignments.load("ddp_speedup")
    for check_id, ccfg in a.raw["checks"].items():
        f = ddp.check_run(_run(steps=0)) if check_id.startswith("run.") else ddp.NO_TRAINING
        res = _result(ccfg, check_id, f)
        assert res.points == 0 and "no training step was observed" in res.message["en"].lower(), check_id


SPAWN_DUMPS = json.loads((Path(__file__).parents[1] / "fixtures" / "stacks" / "spawn_without_main_guard_n2.json")
                         .read_text())


def test_stuck_in_reads_the_real_dumps_of_a_spawn_worker_rerunning_the_script():
    """Dumps of hang_spawn_without_main_guard (2 ranks) killed at the wall-clock limit."""
    got = {name: (stacks.stuck_in(txt) or {}).get("en") for name, txt in SPAWN_DUMPS.items()}
    assert got["rank0"] == got["rank1"] == "waiting for a batch from its DataLoader worker"
    assert got["rank0-child18"] == ("a spawned worker re-running the script's top level, "
                                    "in init_process_group (rendezvous)")
    assert got["rank1-child16"] == ("a spawned worker re-running the script's top level, "
                                    "in DDP() construction (parameter check)")
    assert stacks.helper_process(SPAWN_DUMPS["rank0-child14"])  # the resource tracker: not named


def test_a_spawn_hang_is_named_in_the_verdict():
    run = _run(steps=0, finished=False, rc=-9)
    run.result.timed_out, run.result.killed_reason = True, "timeout"
    run.stacks = SPAWN_DUMPS
    f = ddp.check_run(run)
    assert (f.status, f.key) == (CheckStatus.FAIL, "hang_spawn")
    where = f.params["where"]["en"]
    assert "unknown" not in where and "resource" not in where
    assert "rank0-child18: a spawned worker re-running the script's top level, in init_process_group" in where


def test_a_hang_reads_in_chinese_in_the_chinese_report():
    """Where each rank waited, and why a run died, come in the report's language, not in English."""
    cfg = assignments.load("ddp_speedup").raw["checks"]["run.distributed"]
    run = _run(steps=0, finished=False, rc=-9)
    run.result.timed_out, run.result.killed_reason = True, "timeout"
    run.stacks = SPAWN_DUMPS
    zh = _result(cfg, "run.distributed", ddp.check_run(run)).message["zh"]
    assert "DataLoader 工作进程" in zh and "waiting for" not in zh and "re-running" not in zh, zh
    died = _run(steps=3, finished=False, rc=-9, killed="memory")
    zh = _result(cfg, "run.distributed", ddp.check_run(died)).message["zh"]
    assert "超出内存上限" in zh and "memory" not in zh, zh


def test_a_spawn_worker_crash_is_traced_to_the_missing_main_guard():
    run = _run(steps=0, finished=False, rc=1)
    run.ranks[0].records.append({"type": "exception", "exc_type": "RuntimeError",
                                 "message": "DataLoader worker (pid(s) 18) exited unexpectedly", "line": 71})
    assert ddp.check_run(run).key == "raised"
    # the worker's own traceback, written before the rank's, is beyond the reported 4,000-character tail
    run.scan_logs = {"rank0": '[rank0]:   File "/usr/lib/python3.11/multiprocessing/spawn.py", line 291, in '
                              '_fixup_main_from_path\n' + "x" * 5000}
    assert ddp.check_run(run).key == "raised_spawn"


def test_logging_on_a_nonzero_rank_counts_like_printing():
    run = _run()
    run.ranks[1].records.append({"type": "prints", "count": 2, "logging": 20, "tail": []})
    f = ddp.check_rank0_io(run, epochs=2, extra_prints=3)
    assert (f.status, f.key, f.params["prints"], f.params["logging_calls"]) == (CheckStatus.WARN, "prints", 22, 20)
    res = _result(assignments.load("ddp_speedup").raw["checks"]["io.rank0_only"], "io.rank0_only", f)
    assert "printed 22 lines (2 print() calls, 20 logging records)" in res.message["en"]


@pytest.mark.parametrize("speedups, expected", [
    ([0.94, 0.79, 0.41], None),  # the busy-host pair spreads the three too far: measure more
    ([0.94, 0.79, 0.41, 0.86], 0.86),  # the tightest three settle; the outlier is ignored
    ([1.5, 1.6, 1.55], 1.55),
    ([1.5, 1.6], None),  # fewer than the pairs asked for
])
def test_calibration_settles_on_the_tightest_pairs(speedups, expected):
    from graders.ddp_speedup.calibration import settled_speedup

    got = settled_speedup(speedups, pairs=3, max_spread=1.3)
    assert got == (pytest.approx(expected) if expected is not None else None)


# -- score semantics, the not-distributed script, unusual but correct scripts ------------
def test_equal_parameters_without_any_synchronisation_fail_grad_sync():
    """The starter on 2 processes: equal digests from equal seeds and data, no process group, no DDP."""
    starter = _run(pg=False, sync=None)
    f = ddp.check_grad_sync(starter)
    assert (f.status, f.key) == (CheckStatus.FAIL, "no_sync_seen")
    assert ddp.check_run(starter).key == "no_process_group"
    for check in (ddp.check_disjoint, ddp.check_coverage, ddp.check_reshuffle, lambda r: ddp.check_rank0_io(r, 2, 3)):
        assert check(starter).key == "not_distributed"
    # a process group but still nothing that synchronises gradients
    assert ddp.check_grad_sync(_run(sync=None)).key == "no_sync_seen"
    assert ddp.check_syncbn(_run(sync=None)).status == CheckStatus.FAIL


@pytest.mark.parametrize("counts, key", [(None, "ok"), ([40, 0, 0], "ok"), ([30, 0, 10], "per_rank_in_training"),
                                         ([40, 20, 0], "per_rank_in_training")])
def test_syncbn_judges_what_every_batchnorm_normalised_with_in_training(counts, key):
    """Layers are counted at the wrap and the first step; a group swapped later (lone) or a plain BatchNorm outside the
    trained modules (plain) shows only in the harness's ``bn_calls`` counts, and warns with half the points."""
    run = _run()
    for stream in run.ranks.values():  # DDP wraps every stepped parameter, whose model holds 2 SyncBatchNorm layers
        stream.records.insert(0, {"type": "norms", "batchnorm": 0, "syncbatchnorm": 2, "syncbn_lone": 0,
                                  "sharded": False, "stepped": 10, "in_ddp": 10, "source": "trained"})
    if counts is not None:
        for r, stream in run.ranks.items():  # rank 1 alone is enough: its forwards count too
            stream.records.insert(-2, {"type": "bn_calls", "counts": counts if r == 1 else [40, 0, 0]})
    f = ddp.check_syncbn(run)
    assert f.key == key and f.status == (CheckStatus.PASS if key == "ok" else CheckStatus.WARN), f
    if counts and key != "ok":
        assert f.params == {"calls": counts[1] + counts[2], "all": 40 + sum(counts)} and f.fallback == "plain_bn"


def test_gradients_all_reduced_by_hand_count_as_synchronisation():
    hand = _run(sync="hand", hand=1.0)
    assert ddp.sync_kind(hand) == "hand"
    assert (ddp.check_grad_sync(hand).status, ddp.check_grad_sync(hand).key) == (CheckStatus.PASS, "ok_hand")
    assert ddp.check_no_sync(hand).status == CheckStatus.PASS
    assert ddp.sync_kind(_run(sync="hand", hand=0.3)) is None  # a loss all-reduced for logging is not a gradient sync


def test_data_read_without_a_dataloader_is_not_observed_never_passed():
    f = ddp.check_disjoint(_run(loader=False))
    assert (f.status, f.key) == (CheckStatus.SKIP, "not_observed")
    assert ddp.check_coverage(_run(loader=False)).key == ddp.check_reshuffle(_run(loader=False)).key == "not_observed"
    res = _result(assignments.load("ddp_speedup").raw["checks"]["sampler.disjoint"], "sampler.disjoint", f)
    assert res.points == 0 and res.max_points == 15 and "could not be observed" in res.message["en"]


def test_every_finding_is_scored_out_of_the_assignment_total():
    a = assignments.load("ddp_speedup")
    assert sum(c["points"] for c in a.raw["checks"].values()) == a.raw["total"] == 100
    for f in (ddp.NO_TRAINING, ddp.NOT_FINISHED, ddp.NOT_DISTRIBUTED, ddp.NOT_OBSERVED,
              ddp.Finding(CheckStatus.SKIP, "host", {"reason": "no GPU"}), ddp.Finding(CheckStatus.SKIP, "fast")):
        total = sum(_result(c, cid, f).max_points for cid, c in a.raw["checks"].items())
        assert total == 100, f


def test_host_skips_say_not_graded_here():
    from graders.checks.render import not_graded_here
    a = assignments.load("ddp_speedup")
    res = _result(a.raw["checks"]["speedup"], "speedup", ddp.Finding(CheckStatus.SKIP, "host", {"reason": "no GPU"}))
    assert not_graded_here(res) and res.evidence["not_graded_here"] and res.max_points == 10
    res = _result(a.raw["checks"]["sampler.disjoint"], "sampler.disjoint", ddp.NOT_OBSERVED)
    assert not not_graded_here(res)


def test_student_values_never_crash_the_renderer():
    a = assignments.load("ddp_speedup")
    f = ddp.Finding(CheckStatus.FAIL, "overlap_no_sampler", {"a": 0, "b": 1, "shared": "{0.__class__}", "of": None,
                    "epoch": 0, "sampler": "{__import__}"})
    res = _result(a.raw["checks"]["sampler.disjoint"], "sampler.disjoint", f)
    assert "{__import__}" in res.message["en"] and res.points == 0


def test_a_non_numeric_learning_rate_is_shown_not_formatted():
    run = _run()
    run.ranks[0].records.append({"type": "optimizer", "class": "Weird", "lr": ["fast"]})
    f = ddp.batch_info(run, run)
    assert f.params["lr1"] == "fast" and f.params["lrn"] == "fast"


def test_idle_is_what_neither_cpu_nor_data_loading_explains():
    step = lambda t, cpu, dw: {"t": t, "runqueue": 0.0, "cpu": cpu, "data_wait": dw}  # noqa: E731
    sleepy = [step(0, 0, 0), step(0.2, 0.1, 0.0), step(0.4, 0.2, 0.0)]  # 0.1 s compute + 0.1 s sleep per step
    pairs = list(zip(sleepy, sleepy[1:]))
    assert timing.unexplained_idle(pairs, [0.2, 0.2]) == pytest.approx(0.5)
    workers = [step(0, 0, 0), step(0.2, 0.05, 0.15), step(0.4, 0.1, 0.3)]  # waiting for DataLoader workers
    assert timing.unexplained_idle(list(zip(workers, workers[1:])), [0.2, 0.2]) == pytest.approx(0.0)
    assert timing.unexplained_idle([({"t": 0}, {"t": 1})], [1.0]) is None  # an old harness: not judged


def test_waiting_for_a_busy_cpu_is_not_the_scripts_time():
    rows = [{"t": 0.0, "runqueue": 1.0}, {"t": 1.0, "runqueue": 1.6}]
    assert timing.own_time(*rows) == pytest.approx(0.4)
    assert timing.own_time({"t": 0.0, "runqueue": None}, {"t": 1.0, "runqueue": None}) == 1.0
    assert timing.own_time({"t": 0.0, "runqueue": 0.0}, {"t": 1.0, "runqueue": 5.0}) == 1.0  # implausible: ignored


def test_every_check_id_of_the_assignment_has_one_home():
    import graders.ddp_speedup.grader  # noqa: F401  (registers "speedup")
    no_code, no_id = CHECKS.missing(assignments.load("ddp_speedup").raw["checks"])
    assert no_code == [] and no_id == []
    with pytest.raises(ValueError):
        CHECKS.check("sampler.disjoint")(lambda ctx: None)


def test_torch_compile_gets_extra_wall_time_not_the_others(tmp_path):
    from graders.ddp_speedup.grader import wall_limits
    script = tmp_path / "train.py"
    script.write_text("model = torch.compile(model)\n")
    base = assignments.load("ddp_speedup").limits["cpu"]
    assert wall_limits(base, script)["wall_s"] == base["wall_s"] + base["compile_extra_s"]
    script.write_text("model = DDP(model)\n")
    assert wall_limits(base, script) == {k: v for k, v in base.items() if k != "compile_extra_s"}


def test_every_killed_reason_has_its_own_bilingual_label():
    from graders.sandbox.result import KilledReason

    for reason in KilledReason:
        label = reason.label
        assert set(label) == {"zh", "en"} and all(label.values()), reason
        assert label["zh"] != reason.value, reason  # a real zh label, not the id echoed
        assert ddp._killed(reason) == label == ddp._killed(reason.value)  # stored reports hold the string
    assert ddp._killed(None) == {"zh": "自行退出", "en": "exit"}
    assert ddp._killed("something-new") == {"zh": "something-new", "en": "something-new"}



def _views(run, halves: dict[int, list[int]], base: int, digests: dict[int, str]) -> None:
    """Each rank's epoch as the harness reports a view: indices in the base numbering, the view's length."""
    for r, indices in halves.items():
        ep = run.ranks[r].first("epoch")
        ep.update(indices=indices, dataset_len=base, local_len=base * 9 // 10, view="Subset -> TensorDataset",
                  view_digest=digests[r], batches=len(indices) // 4 + 1)


def test_a_view_is_covered_against_its_own_length_and_a_different_split_per_rank_is_named():
    """minGPT's train half of a random_split: coverage is of the half; an unseeded split differs per rank."""
    run = _run(steps=10)
    train = list(range(0, 80, 10)) + [i for i in range(80) if i % 10]  # 72 of 80 base samples, 8 held out for test
    _views(run, {0: train[0::2], 1: train[1::2]}, 80, {0: "ab" * 8, 1: "ab" * 8})
    assert ddp.check_coverage(run).status == CheckStatus.PASS  # 72 of the view's 72, not 72 of 80
    assert ddp.check_disjoint(run).status == CheckStatus.PASS
    other = list(range(0, 72))  # rank 1 split differently: its half overlaps rank 0's
    _views(run, {0: train[0::2], 1: other[1::2]}, 80, {0: "ab" * 8, 1: "cd" * 8})
    f = ddp.check_disjoint(run)
    assert (f.status, f.key) == (CheckStatus.FAIL, "overlap_views_differ")


def test_every_finding_of_a_check_says_what_it_rests_on_without_touching_shared_findings():
    """The registry adds ``rests_on`` to each finding of a check that names one (homework 1's names
    every check but the speed-up), on a copy: a shared constant finding stays as it was."""
    from graders.checks.registry import Context, Registry
    from graders.checks.ddp import Finding

    shared = Finding(CheckStatus.PASS, "ok", {}, {"seen": 1})
    checks = Registry()
    checks.rests_on["a"] = "words"
    checks.check("a")(lambda ctx: shared)
    checks.check("b")(lambda ctx: shared)
    assert checks["a"](Context(cfg={})).evidence == {"seen": 1, "rests_on": "words"}
    assert checks["b"](Context(cfg={})).evidence == {"seen": 1} and shared.evidence == {"seen": 1}
    assert set(CHECKS.rests_on) == set(CHECKS) - {"speedup"}
