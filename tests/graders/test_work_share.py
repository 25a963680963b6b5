"""graders.checks.share: each rank's model trains on its own 1/N of every step's global batch."""
from __future__ import annotations

from coursework.report import CheckStatus
from graders.checks import share
from graders.sandbox import SandboxResult
from graders.torchrun import RankStream, TorchrunRun


def _run(seen: dict[int, list[list[int]]]) -> TorchrunRun:
    ranks = {}
    for r, steps in seen.items():
        n = len(steps)
        ranks[r] = RankStream(r, records=[{"type": "steps", "t": [0.0] * n, "samples": [0] * n, "loss": [None] * n,
                                           "backwards": [1] * n, "buckets": [1] * n, "synced": [1] * n,
                                           "bucket_bytes": [0] * n, "seen": steps, "unread": [0] * n}])
    run = TorchrunRun(nproc=len(seen), result=SandboxResult(returncode=0, timed_out=False, wall_s=1.0), ranks=ranks,
                      stacks={}, logs={}, tampering=[])
    run.evidence = {"host": {"cpu_s": {0: 9.0, 1: 5.0}}}
    return run


def test_disjoint_halves_are_each_ranks_share():
    assert share.uneven(_run({0: [[0, 1], [4, 5]], 1: [[2, 3], [6, 7]]})) is None


def test_rank0_training_the_gathered_batch_is_not_a_share():
    got = share.uneven(_run({0: [[0, 1, 2, 3], [4, 5, 6, 7]], 1: [[], []]}))  # rank 1 fed blank images
    assert got["rank"] == 0 and got["trained"] == 8 and got["share"] == 4 and got["cpu_s"] == {"0": 9.0, "1": 5.0}


def test_every_rank_training_the_whole_batch_is_twice_its_share():
    both = [[0, 1, 2, 3], [4, 5, 6, 7]]
    got = share.uneven(_run({0: both, 1: both}))
    assert got["ratio"] == 2.0


def test_nothing_to_judge_without_marks():
    assert share.uneven(_run({0: [[], []], 1: [[], []]})) is None


def test_images_whose_marks_were_blurred_are_work_all_the_same():
    # rank 0 trains its own shard and rank 1's, blurred so that their marks cannot be read
    run = _run({0: [[0, 1], [4, 5]], 1: [[2, 3], [6, 7]]})
    run.ranks[0].records[0]["unread"] = [2, 2]
    got = share.uneven(run)
    assert got["rank"] == 0 and got["trained"] == 8 and got["share"] == 6


def test_disjoint_fails_on_an_uneven_share(monkeypatch):
    from graders.checks import ddp
    run = _run({0: [[0, 1, 2, 3]], 1: [[]]})
    monkeypatch.setattr(ddp, "_sampler_check", lambda *a: ddp.Finding(CheckStatus.PASS, "ok", {"epochs": 1}))
    monkeypatch.setattr(ddp, "distributed_gate", lambda run: None)
    got = ddp.check_disjoint(run)
    assert got.status == CheckStatus.FAIL and got.key == "uneven_share" and got.params["rank"] == 0


def test_draws_with_replacement_that_repeat_inside_a_step_are_an_even_split():
    # each rank draws 4 with replacement from its own small shard: repeats inside a step are one sample's work
    # on both sides of the comparison, not extra work on one side only
    assert share.uneven(_run({0: [[0, 0, 2, 2], [4, 4, 4, 6]], 1: [[1, 1, 3, 3], [5, 7, 7, 7]]})) is None
