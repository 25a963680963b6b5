"""graders.early_stop: a run is stopped only once every rank shows it is not distributed.

The real-grader side is the ``starter_not_distributed`` sample (its summary must say the run was
stopped) and the correct samples (never stopped: they form a process group before their first step).
"""
from __future__ import annotations

from graders import early_stop
from graders.torchrun import RankStream


def stream(rank, steps, *, group=None, epoch=False, raised=False):
    s = RankStream(rank)
    if group:
        s.records.append({"type": "process_group", "world": group, "backend": "gloo"})
    for start in range(0, steps, 25):
        s.records.append({"type": "steps", "t": [0.0] * min(25, steps - start)})
    if epoch:
        s.records.append({"type": "epoch", "loader": 1})
    if raised:
        s.records.append({"type": "exception", "exc_type": "RuntimeError", "message": "x"})
    return s


def test_two_single_card_copies_are_stopped_after_a_first_epoch():
    decide = early_stop.not_distributed(2, 25, 200)
    assert decide({0: stream(0, 50, epoch=True), 1: stream(1, 50, epoch=True)}) == early_stop.NO_PROCESS_GROUP
    assert decide({0: stream(0, 50, epoch=True), 1: stream(1, 25)}) is None  # rank 1 has not finished an epoch
    assert decide({0: stream(0, 50, epoch=True)}) is None  # rank 1 not heard from yet
    assert decide({0: stream(0, 200), 1: stream(1, 200)}) == early_stop.NO_PROCESS_GROUP  # long epochs: bounded


def test_a_distributed_or_failing_rank_is_never_stopped():
    decide = early_stop.not_distributed(2, 25, 200)
    assert decide({0: stream(0, 500, group=2, epoch=True), 1: stream(1, 500, group=2, epoch=True)}) is None
    assert decide({0: stream(0, 500, epoch=True), 1: stream(1, 500, group=2, epoch=True)}) is None
    assert decide({0: stream(0, 500, epoch=True, raised=True), 1: stream(1, 500, epoch=True)}) is None


def test_records_a_script_forged_cannot_crash_the_predicate():
    s = stream(0, 50, epoch=True)
    s.records += [{"type": "steps", "t": "many"}, {"type": "process_group", "world": True}, "junk", {"type": 3}]
    decide = early_stop.not_distributed(2, 25, 200)
    assert decide({0: s, 1: stream(1, 50, epoch=True)}) == early_stop.NO_PROCESS_GROUP  # a bool is no world size
    assert early_stop.steps_taken(s.records) == 50


def test_a_bounded_single_run_ends_after_as_many_steps():
    decide = early_stop.enough_steps(1, 25, 200)
    assert decide({0: stream(0, 50, epoch=True)}) == early_stop.ENOUGH_STEPS
    assert decide({0: stream(0, 20, epoch=True)}) is None


def trained_apart(rank, *, epochs=2, digest=None, synced=0, hand=0.0, group: int | None = 2, steps=60):
    """A rank of a run with a process group: ``epochs`` epoch records, step rows with ``synced`` bucket
    syncs and ``hand`` of the gradients all-reduced by hand, and its stepped parameters' digests."""
    s = RankStream(rank)
    if group:
        s.records.append({"type": "process_group", "world": group, "backend": "gloo"})
    s.records.append({"type": "steps", "t": [0.0] * steps, "synced": [synced] * steps, "hand_reduced": [hand] * steps})
    s.records += [{"type": "epoch", "loader": 1}] * epochs
    for step in (1, 2, 4, 8):
        s.records.append({"type": "params", "step": step, "digest": digest or f"d{step}"})
    return s


def test_ranks_that_train_apart_are_stopped_after_two_epochs():
    decide = early_stop.not_synchronised(2, 25, 200)
    apart = {0: trained_apart(0, digest="a"), 1: trained_apart(1, digest="b")}
    assert decide(apart) == early_stop.NO_SYNC
    assert decide({0: trained_apart(0, digest="a", epochs=1), 1: trained_apart(1, digest="b", epochs=1)}) is None


def test_any_synchroniser_or_equal_parameters_keep_the_run_going():
    """Conservative: DDP (even a decoy's bucket), a by-hand all-reduce of a few gradients, FSDP, equal
    parameters, a raised rank or no process group: the run goes on (the full checks judge it)."""
    decide = early_stop.not_synchronised(2, 25, 200)
    assert decide({0: trained_apart(0), 1: trained_apart(1)}) is None  # equal digests: a synchronised run
    assert decide({0: trained_apart(0, digest="a", synced=1), 1: trained_apart(1, digest="b", synced=1)}) is None
    assert decide({0: trained_apart(0, digest="a", hand=0.1), 1: trained_apart(1, digest="b")}) is None
    fsdp = trained_apart(0, digest="a")
    fsdp.records.append({"type": "fsdp_model"})
    assert decide({0: fsdp, 1: trained_apart(1, digest="b")}) is None
    assert decide({0: trained_apart(0, digest="a", group=None), 1: trained_apart(1, digest="b")}) is None
    raised = trained_apart(1, digest="b")
    raised.records.append({"type": "exception", "exc_type": "RuntimeError", "message": "x"})
    assert decide({0: trained_apart(0, digest="a"), 1: raised}) is None


def test_either_takes_the_first_reason():
    both = early_stop.either(early_stop.not_distributed(2, 25, 200), early_stop.not_synchronised(2, 25, 200))
    assert both({0: stream(0, 50, epoch=True), 1: stream(1, 50, epoch=True)}) == early_stop.NO_PROCESS_GROUP
    assert both({0: trained_apart(0, digest="a"), 1: trained_apart(1, digest="b")}) == early_stop.NO_SYNC
    assert both({0: trained_apart(0), 1: trained_apart(1)}) is None
