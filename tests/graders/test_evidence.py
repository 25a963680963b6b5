"""graders.evidence: outside evidence of a run, and the checks that rest on it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coursework.report import CheckStatus
from graders.checks import ddp, sync
from graders.evidence import SOURCE_OUTSIDE, dcp, files, host, model, outputs
from graders.sandbox import SandboxResult
from graders.torchrun import RankStream, TorchrunRun

ROOT = Path(__file__).resolve().parents[2]


def _run(ranks: dict[int, list[dict]], evidence: dict | None = None, nproc: int = 2) -> TorchrunRun:
    streams = {r: RankStream(r, records=list(recs)) for r, recs in ranks.items()}
    run = TorchrunRun(nproc=nproc, result=SandboxResult(returncode=0, timed_out=False, wall_s=1.0), ranks=streams,
                      stacks={}, logs={}, tampering=[])
    run.evidence = evidence or {}
    return run


def _params(step: int, digest: str, **extra) -> dict:
    return {"type": "params", "step": step, "digest": digest, "tensors": 2, "elements": 1000, "sharded": False,
            "sums": [1.0, 2.0], **extra}


def test_params_compared_during_training_not_only_at_the_end():
    # a broadcast at the end makes the last digests agree; step 2 already differed
    run = _run({0: [_params(1, "a"), _params(2, "b"), _params(40, "z")],
                1: [_params(1, "a"), _params(2, "c", sums=[1.5, 2.0]), _params(40, "z")]})
    got = sync.compare_params(run)
    assert got["differ"] == {"step": 2, "rank": 1, "diff": pytest.approx(1 / 3)}
    assert sync.compare_params(_run({0: [_params(1, "a")], 1: [_params(1, "a")]}))["differ"] is None


def test_params_of_sharded_models_are_not_compared():
    run = _run({0: [_params(1, "a", sharded=True)], 1: [_params(1, "b", sharded=True)]})
    assert sync.compare_params(run) == {"compared": [], "differ": None, "sharded": True, "every_step": False}
    assert sync.compare_params(_run({0: [], 1: []})) is None  # an older harness: nothing to compare


def _steps(digests: list[str]) -> dict:
    n = len(digests)
    return {"type": "steps", "t": [0.0] * n, "samples": [0] * n, "loss": [None] * n, "backwards": [1] * n,
            "buckets": [1] * n, "synced": [1] * n, "bucket_bytes": [0] * n, "pd": digests}


def test_every_step_is_compared_not_a_public_schedule():
    # local SGD averaged only on the steps with a full record (1, 2, 4, 8): step 3 differs and is compared
    same = [_params(s, f"{s:064x}") for s in (1, 2, 4, 8)]
    a = ["%016x" % i for i in range(1, 9)]
    b = list(a)
    b[2] = "f" * 16
    got = sync.compare_params(_run({0: same + [_steps(a)], 1: same + [_steps(b)]}))
    assert got["every_step"] and got["differ"]["step"] == 3 and got["differ"]["rank"] == 1
    assert got["compared"] == list(range(1, 9))
    assert sync.compare_params(_run({0: same + [_steps(a)], 1: same + [_steps(a)]}))["differ"] is None


def test_ddp_drives_only_the_parameters_it_wraps_when_its_hook_fires():
    def rows(stream):
        return [{"synced": x} for x in stream.records[-1].get("synced_rows", [])]
    decoy = {"type": "norms", "stepped": 10, "in_ddp": 0, "synced_rows": [1, 1]}
    unused = {"type": "norms", "stepped": 10, "in_ddp": 10, "synced_rows": [0, 0]}
    good = {"type": "norms", "stepped": 10, "in_ddp": 10, "synced_rows": [1, 1]}
    assert not sync.ddp_drives(_run({0: [decoy], 1: [decoy]}), rows)
    assert not sync.ddp_drives(_run({0: [unused], 1: [unused]}), rows)
    assert sync.ddp_drives(_run({0: [good], 1: [good]}), rows)


def test_loopback_shortfall_only_where_traffic_is_seen():
    recs = {0: [_params(1, "a", elements=25_000)], 1: []}
    seen = {"host": {"loopback": {"seen": True, "bytes": 3_000}}}
    short = sync.loopback_shortfall(_run(recs, seen), steps=40)
    assert short["moved"] == 3_000 and short["least"] > 3_000
    ring = 2 * 1 * 4 * 25_000 * 40  # what a ring all-reduce of the fp32 gradients moves between 2 ranks
    assert short["ring"] == ring
    local_sgd = {"host": {"loopback": {"seen": True, "bytes": ring // 5}}}  # averaged every 5th step
    assert sync.loopback_shortfall(_run(recs, local_sgd), steps=40) is not None
    half = {"host": {"loopback": {"seen": True, "bytes": ring // 2}}}  # an fp16-compressing comm hook
    assert sync.loopback_shortfall(_run(recs, half), steps=40) is None
    # the harness says the model is tiny (a chosen module); the grader's evaluated model says otherwise
    tiny = {0: [_params(1, "a", elements=110)], 1: []}
    evaluated = {**half, "model": {"evaluated": True, "parameters": 25_000}}
    assert sync.loopback_reading(_run(tiny, evaluated), steps=40)["ring"] == ring
    plenty = {"host": {"loopback": {"seen": True, "bytes": 10 ** 9}}}
    assert sync.loopback_shortfall(_run(recs, plenty), steps=40) is None
    gpu = {"host": {"loopback": {"seen": False, "why": "NCCL"}}}
    assert sync.loopback_shortfall(_run(recs, gpu), steps=40) is None


def test_rank_outputs_counts_lines_and_bytes_per_rank(tmp_path):
    for rank, text in ((0, "a\nb\n"), (1, "x\n" * 40)):
        d = tmp_path / "run-1" / "attempt_0" / str(rank)
        d.mkdir(parents=True)
        (d / "stdout.log").write_text(text)
        (d / "stderr.log").write_text("warn\n")
    os.symlink("/etc/passwd", tmp_path / "run-1" / "attempt_0" / "1" / "extra.log")  # never followed
    got = outputs.rank_outputs(tmp_path, 2)
    assert got["source"] == SOURCE_OUTSIDE
    assert got["ranks"][0] == {"stdout_lines": 2, "stdout_redraws": 0, "stdout_bytes": 4,
                               "stderr_lines": 1, "stderr_redraws": 0, "stderr_bytes": 5, "stdout_recurring": 0,
                               "stderr_recurring": 0}
    assert got["ranks"][1]["stdout_lines"] == 40
    assert got["ranks"][1]["stdout_recurring"] == 40


def test_rank_outputs_count_lines_of_a_recurring_shape(tmp_path):
    """A line per epoch written with sys.stdout.write is seen by its shape (numbers blanked) in what the launcher
    captured; a start-up banner and a closing line have shapes of their own."""
    d = tmp_path / "run-1" / "attempt_0" / "1"
    d.mkdir(parents=True)
    (d / "stdout.log").write_text("rank 1/2 ready on cpu\nepoch 0: loss 2.1034\nepoch 1: loss 1.8821\nrank 1 done\n")
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stdout_recurring"] == 2
    (d / "stdout.log").write_text("rank 1/2 ready on cpu\nrank 1 done\n")
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stdout_recurring"] == 0


def test_rank_outputs_count_recurring_lines_on_stderr_whose_numbers_differ(tmp_path):
    """A line per epoch written to stderr (sys.stderr.write, os.write(2, ...)) recurs with other numbers; a
    library's warning raised again each epoch (a DataLoader worker's) repeats its text, and a logger's prefix
    (a clock, a pid) does not make two raisings of one warning differ."""
    d = tmp_path / "run-1" / "attempt_0" / "1"
    d.mkdir(parents=True)
    warning = "/usr/lib/python3/site-packages/x.py:12: UserWarning: 3 workers is many\n  warnings.warn(\n"
    glog = "".join(f"[W1207 10:38:{s:02d}.{s * 7919:06d} {812 + s} ProcessGroupGloo.cpp:514] Warning: slow\n"
                   for s in range(3))
    (d / "stderr.log").write_text(warning * 4 + glog)
    got = outputs.rank_outputs(tmp_path, 2)["ranks"][1]
    assert (got["stderr_lines"], got["stderr_recurring"]) == (11, 0)
    (d / "stderr.log").write_text(warning + "[rank 1] epoch 0: loss 2.1034\n[rank 1] epoch 1: loss 1.8821\n" + glog)
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stderr_recurring"] == 2
    (d / "stderr.log").write_text("[epoch 0/2] done\n[epoch 1/2] done\n[rank1]:[W1207 10:38:19.5 812 a.cpp:1] x\n")
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stderr_recurring"] == 2  # the script's own bracket counts
    (d / "stdout.log").write_text(warning * 2)  # stdout is read as before: a repeated line is a recurring one
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stdout_recurring"] == 4


def test_one_warning_raised_from_two_lines_of_a_library_is_not_a_line_per_epoch(tmp_path):
    """torch's DataLoader warns about too many workers from dataloader.py:431 on the first epoch and :437 after:
    the same message under two locations. A correct script with 16 workers was told rank 1 writes a line per epoch.
    The location Python's warnings put before a message is set aside like a logger's prefix; the message is not."""
    d = tmp_path / "run-1" / "attempt_0" / "1"
    d.mkdir(parents=True)
    msg = "UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max is 2.\n"
    src = "  self.check_worker_number_rationality()\n"
    lib = "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py"
    (d / "stderr.log").write_text(f"{lib}:431: {msg}{src}" + f"{lib}:437: {msg}{src}" * 2)
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stderr_recurring"] == 0
    (d / "stderr.log").write_text("".join(f"{lib}:431: UserWarning: epoch {e} loss {2.1 - e / 10:.4f}\n" for e in range(3)))
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stderr_recurring"] == 3  # a message of its own each time
    deep = "/srv/" + "very_long_folder_name/" * 9 + "torch/utils/data/dataloader.py"  # past the 160 characters a shape reads
    (d / "stderr.log").write_text(f"{deep}:431: {msg}{src}" + f"{deep}:437: {msg}{src}")
    assert outputs.rank_outputs(tmp_path, 2)["ranks"][1]["stderr_recurring"] == 0


def test_rank_outputs_count_progress_bar_redraws(tmp_path):
    """tqdm redraws one line with \\r: a terminal shows one line, the launcher captured every redraw."""
    d = tmp_path / "run-1" / "attempt_0" / "1"
    d.mkdir(parents=True)
    bar = "".join(f"\repoch 0: {i:3d}%|{'#' * (i // 10):10s}| {i}/100" for i in range(0, 101, 5)) + "\n"
    (d / "stderr.log").write_text(bar * 2 + "a windows line\r\n")
    got = outputs.rank_outputs(tmp_path, 2)["ranks"][1]
    assert (got["stderr_lines"], got["stderr_redraws"]) == (3, 42)


def test_unclaimed_checkpoints_judged_by_content_and_name(tmp_path):
    """A file no rank reported writing (a C++ writer the harness misses) is a checkpoint by its first
    bytes, and a rank number in its name says whose it is."""
    (tmp_path / "model_rank1.pt").write_bytes(b"PK\x03\x04" + b"\0" * 40)  # TorchScript: a zip archive
    (tmp_path / "state.rank-1").write_bytes(b"\x80\x04\x95" + b"\0" * 20)  # a pickle, odd suffix
    (tmp_path / "weights").write_bytes(b"\x93NUMPY" + b"\0" * 20)
    (tmp_path / "notes.txt").write_text("epoch 1 done\n")
    (tmp_path / "ckpt_epoch1.pt").write_bytes(b"PK\x03\x04")  # an epoch number is no rank
    claimed = {"type": "writes", "paths": [[str(tmp_path / "notes.txt"), 1]], "more": 0}
    got = files.created_files(_run({0: [claimed], 1: []}), tmp_path)
    assert got["unclaimed"] == [["ckpt_epoch1.pt", None], ["model_rank1.pt", 1], ["state.rank-1", 1],
                                ["weights", None]]
    assert got["checkpoints"] == {0: [], 1: []}
    by_rank = sync.rank_output(_run({0: [], 1: []}, {"files": got}))
    assert by_rank[1]["files"] == ["model_rank1.pt", "state.rank-1"]
    assert sync.unclaimed_checkpoints(_run({0: [], 1: []}, {"files": got})) == ["ckpt_epoch1.pt", "weights"]


def test_created_files_gives_the_size_of_every_checkpoint_it_lists(tmp_path):
    (tmp_path / "ckpt_rank1.pkl").write_bytes(b"\x80\x04" + b"\0" * 998)
    (tmp_path / "model_rank1.pt").write_bytes(b"PK\x03\x04" + b"\0" * 96)
    writes = {"type": "writes", "paths": [[str(tmp_path / "ckpt_rank1.pkl"), 1]], "more": 0}
    got = files.created_files(_run({0: [], 1: [writes]}), tmp_path)
    assert got["sizes"] == {"ckpt_rank1.pkl": 1000, "model_rank1.pt": 100}


def test_a_distributed_checkpoints_metadata_is_read_without_running_its_pickle(tmp_path):
    """Keys and global shapes of a real dcp.save, nested {"model", "optim"}; a .metadata that names os.system is
    read as inert stand-ins (nothing runs), and a broken one is unreadable."""
    import torch
    import torch.distributed.checkpoint as torch_dcp
    state = {"model": {"tok.weight": torch.zeros(8, 4), "ln.bias": torch.zeros(4)}, "step": 3,
             "optim": {"state": {"tok.weight": {"exp_avg": torch.zeros(8, 4)}}, "param_groups": [{"lr": 0.1}]}}
    with pytest.warns(UserWarning):  # no process group: one process saves alone
        torch_dcp.save(state, checkpoint_id=tmp_path / "ckpt", no_dist=True)
    read = dcp.read_metadata(tmp_path / "ckpt" / ".metadata")
    assert read["tensors"]["model.tok.weight"] == [8, 4] and read["tensors"]["model.ln.bias"] == [4]
    assert read["tensors"]["optim.state.tok.weight.exp_avg"] == [8, 4] and read["other"] >= 1
    assert dcp.holds(read, [["tok.weight", [8, 4]], ["ln.bias", [4]]]) == ([], 2)
    assert dcp.holds(read, [["tok.weight", [4, 8]], ["ln.weight", [4]]]) == (["tok.weight", "ln.weight"], 2)
    assert dcp.holds({"tensors": {"optim.state.tok.weight.exp_avg": [8, 4]}}, [["tok.weight", [8, 4]]])[0] == ["tok.weight"]
    left = files.scan(tmp_path)
    assert list(dcp.checkpoints(left, tmp_path)["checkpoints"]) == ["ckpt/.metadata"]

    class Hostile:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))
    import pickle
    (tmp_path / "hostile").write_bytes(pickle.dumps({"state_dict_metadata": Hostile()}))
    assert dcp.read_metadata(tmp_path / "hostile") == {"error": "no state_dict_metadata"}
    assert not (tmp_path / "ran").exists()
    (tmp_path / "broken").write_bytes(b"\x80\x04garbage")
    assert dcp.read_metadata(tmp_path / "broken")["error"].startswith("unreadable")
    (tmp_path / "link").symlink_to(tmp_path / "ckpt" / ".metadata")
    assert "error" in dcp.read_metadata(tmp_path / "link")


def test_a_metadata_whose_chunks_cover_part_of_a_tensor_lists_it_as_partial(tmp_path):
    """``if rank == 0: dcp.save(..., no_dist=True)`` on a sharded model: .metadata gives every tensor its global
    shape but lists only rank 0's chunks, half of each tensor; the other half was never written. A tensor whose
    chunks cover it whole, in one chunk or in two ranks' halves, is not partial; nor is one with no chunk
    readable at all counted as whole."""
    import pickle
    import torch
    from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata, Metadata, TensorProperties,
                                                       TensorStorageMetadata)

    def entry(shape, *chunks):
        return TensorStorageMetadata(TensorProperties(dtype=torch.float32), torch.Size(shape),
                                     [ChunkStorageMetadata(torch.Size(o), torch.Size(z)) for o, z in chunks])
    meta = Metadata(state_dict_metadata={
        "w": entry((8, 4), ((0, 0), (4, 4))),  # rank 0's half only
        "v": entry((8, 4), ((0, 0), (4, 4)), ((4, 0), (4, 4))),  # both halves
        "b": entry((4,), ((0,), (4,))),
        "u": entry((6,)),  # no chunk at all
    })
    (tmp_path / ".metadata").write_bytes(pickle.dumps(meta))
    read = dcp.read_metadata(tmp_path / ".metadata")
    assert read["tensors"] == {"w": [8, 4], "v": [8, 4], "b": [4], "u": [6]}
    assert read["partial"] == {"w": [16, 32], "u": [0, 6]}
    shapes = [["w", [8, 4]], ["v", [8, 4]], ["b", [4]]]
    assert dcp.holds(read, shapes) == ([], 3)
    assert dcp.partial(read, shapes) == ["w"]
    assert dcp.partial(read, [["v", [8, 4]], ["b", [4]]]) == []


def test_a_metadata_of_millions_of_tiny_containers_is_refused_before_it_is_built(tmp_path, monkeypatch):
    """A file under the size bound made of one-byte ``EMPTY_LIST`` opcodes would build one object per byte in the
    grader; its opcodes are counted first and it is refused without unpickling it."""
    hostile = tmp_path / ".metadata"
    hostile.write_bytes(b"\x80\x04(" + b"]" * (dcp.MAX_PICKLE_OPS + 1) + b"l.")  # a list of a million empty lists
    assert hostile.stat().st_size < dcp.MAX_METADATA_BYTES

    def built(self):
        raise AssertionError("unpickled")
    monkeypatch.setattr(dcp._StubUnpickler, "load", built)
    assert dcp.read_metadata(hostile) == {"error": "unreadable: too many pickle operations"}


def test_created_files_keeps_only_what_the_run_left(tmp_path):
    (tmp_path / "ckpt-1.pt").write_bytes(b"x")
    (tmp_path / "torchinductor_root").mkdir()
    (tmp_path / "torchinductor_root" / "cache.py").write_text("")
    writes = {"type": "writes", "paths": [[str(tmp_path / "ckpt-1.pt"), 1], [str(tmp_path / "gone.tmp"), 1]], "more": 0}
    run = _run({0: [], 1: [writes]})
    got = files.created_files(run, tmp_path)
    assert got["ranks"] == {0: [], 1: ["ckpt-1.pt"]} and got["left"] == 1


def test_the_listing_reaches_every_depth_and_into_compiler_caches(tmp_path, monkeypatch):
    """A run folder five levels deep is the script's as much as the top level; a compiler cache's own files
    (source, shared objects, its pickles with no suffix) are not, but a saved model put in a folder with a
    cache's name counts; what the listing cannot reach is named, not dropped."""
    deep = tmp_path / "outputs" / "ddp_run" / "2026-12-07" / "rank1" / "checkpoints"
    deep.mkdir(parents=True)
    (deep / "epoch1.pkl").write_bytes(b"\x80\x04\x95" + b"\0" * 20)
    inductor = tmp_path / "torchinductor_student" / "fxgraph" / "dh" / "fdh4c"
    inductor.mkdir(parents=True)
    (inductor / "fuoi6hebni3nv6").write_bytes(b"\x80\x04\x95" + b"\0" * 200)  # inductor's own pickle
    (tmp_path / "torchinductor_student" / "kernel.so").write_bytes(b"\x7fELF" + b"\0" * 200)
    hidden = tmp_path / ".cache" / "run"
    hidden.mkdir(parents=True)
    (hidden / "state_r1.pkl").write_bytes(b"\x80\x04\x95" + b"\0" * 20)
    (hidden / "weights").write_bytes(b"PK\x03\x04" + b"\0" * 20)  # torch.save's zip: no compiler writes one
    writes = {"type": "writes", "paths": [[str(deep / "epoch1.pkl"), 1], [str(hidden / "state_r1.pkl"), 1],
                                          [str(inductor / "fuoi6hebni3nv6"), 1]], "more": 0}
    got = files.created_files(_run({0: [], 1: [writes]}), tmp_path)
    assert got["ranks"][1] == [".cache/run/state_r1.pkl", "outputs/ddp_run/2026-12-07/rank1/checkpoints/epoch1.pkl"]
    assert got["checkpoints"][1] == got["ranks"][1]
    assert got["unclaimed"] == [[".cache/run/weights", None]] and got["unlisted"] == []
    monkeypatch.setattr(files, "MAX_DEPTH", 3)  # past any depth the grader lists: named as unlisted
    assert files.created_files(_run({0: [], 1: [writes]}), tmp_path)["unlisted"] == [
        "outputs/ddp_run/2026-12-07/rank1", "torchinductor_student/fxgraph/dh/fdh4c"]
    monkeypatch.setattr(files, "MAX_DEPTH", 32)
    monkeypatch.setattr(files, "MAX_ENTRIES", 3)  # more entries than it lists: the rest is unlisted
    assert files.created_files(_run({0: [], 1: [writes]}), tmp_path)["unlisted"]


def test_a_write_whose_path_the_harness_cut_is_still_the_rank_s(tmp_path):
    """The harness keeps a path's last 300 characters: a checkpoint under folders nested to make its path longer
    arrives as a tail, and is rank 1's all the same (not an unclaimed file with no rank)."""
    deep = tmp_path.joinpath(*[f"level_{i:02d}_" + "x" * 40 for i in range(8)])
    deep.mkdir(parents=True)
    (deep / "state.pkl").write_bytes(b"\x80\x04\x95" + b"\0" * 20)
    path = str(deep / "state.pkl")
    assert len(path) > 300
    writes = {"type": "writes", "paths": [[path[-300:], 1]], "more": 0}  # as witness.Writes.record sends it
    got = files.created_files(_run({0: [], 1: [writes]}), tmp_path)
    assert got["ranks"][1] == [os.path.relpath(path, tmp_path)[:200]] and got["unclaimed"] == []


def test_a_checkpoint_a_rank_wrote_outside_the_work_folder_counts_by_its_name(tmp_path):
    """The sandbox's /tmp ends with the run: rank 1's pickle there cannot be read afterwards, but rank 1's record of
    writing it counts against the run; a temporary file the script removed from the work folder counts for nothing."""
    writes = {"type": "writes", "paths": [["/tmp/ckpt_rank1.pkl", 1], ["/tmp/scratch.txt", 1],
                                          [str(tmp_path / "gone.pt.tmp"), 1], [str(tmp_path / "gone.pt"), 1]], "more": 0}
    got = files.created_files(_run({0: [], 1: [writes]}), tmp_path)
    assert got["elsewhere"] == {1: ["/tmp/ckpt_rank1.pkl"]} and got["ranks"][1] == []
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    found = ddp.check_rank0_io(_run(recs, {"files": got, "outputs": {"ranks": {}}}), 2, 3)
    assert (found.status, found.key, found.params["paths"]) == (CheckStatus.FAIL, "files_elsewhere", "/tmp/ckpt_rank1.pkl")


def test_a_file_a_rank_wrote_outside_the_work_folder_counts_whatever_its_suffix(tmp_path):
    """Round 5: rank 1 pickled NumPy weights to /tmp/ddp_scratch_rank1.state. The grader cannot read /tmp after the
    run, so a name that is neither code, a compiler's cache nor a log is taken for the checkpoint it may be; a log
    by its name is output (other_files); a compiler's cache or code written there is nobody's."""
    writes = {"type": "writes", "paths": [["/tmp/ddp_scratch_rank1.state", 1], ["/tmp/ddp_scratch_rank1.txt", 1],
                                          ["/tmp/torchinductor_x/ab/cab.py", 1], ["/tmp/k/__pycache__/m.pyc.123", 1],
                                          ["/tmp/build/kernel.so", 1]], "more": 0}
    got = files.created_files(_run({0: [], 1: [writes]}), tmp_path)
    assert got["elsewhere"] == {1: ["/tmp/ddp_scratch_rank1.state"]}
    assert got["elsewhere_logs"] == {1: ["/tmp/ddp_scratch_rank1.txt"]}
    assert sync.rank_output(_run({0: [], 1: []}, {"files": got}))[1]["other_files"] == ["/tmp/ddp_scratch_rank1.txt"]
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    found = ddp.check_rank0_io(_run(recs, {"files": got, "outputs": {"ranks": {}}}), 2, 3)
    assert (found.status, found.key) == (CheckStatus.FAIL, "files_elsewhere")
    assert "/tmp/ddp_scratch_rank1.state" in found.params["paths"]
    logs_only = {**got, "elsewhere": {}}
    found = ddp.check_rank0_io(_run(recs, {"files": logs_only, "outputs": {"ranks": {}}}), 2, 3)
    assert (found.status, found.key) == (CheckStatus.WARN, "files_other")


def test_dot_cache_is_no_compiler_cache_and_numpy_pickles_count_in_one(tmp_path):
    """Round 5: every rank pickled NumPy weights to .cache/state{rank}/latest and appended .cache/state{rank}/metrics.csv.
    .cache is only the root of the job's caches: what a script puts there is judged as anywhere; in a compiler's own
    folder its pickles and source stay set aside, but a pickle of NumPy arrays and a .csv log do not."""
    import pickle
    import numpy as np
    state = tmp_path / ".cache" / "state1"
    state.mkdir(parents=True)
    (state / "latest").write_bytes(pickle.dumps({"epoch": 0, "model": {"w": np.zeros(8, np.float32)}}, protocol=4))
    (state / "metrics.csv").write_text("0,2.1034,25000\n")
    inductor = tmp_path / ".cache" / "torchinductor" / "fxgraph" / "dh"
    inductor.mkdir(parents=True)
    (inductor / "entry").write_bytes(pickle.dumps({"source": "import torch\n", "n": 3}, protocol=4))  # the compiler's
    (inductor / "c.py").write_text("import torch\n")
    (inductor / "hidden").write_bytes(pickle.dumps([np.ones(4)], protocol=2))  # NumPy in a compiler's folder
    (inductor / "epochs.csv").write_text("0,2.1\n")
    paths = [state / "latest", state / "metrics.csv", inductor / "entry", inductor / "c.py", inductor / "hidden",
             inductor / "epochs.csv"]
    writes = {"type": "writes", "paths": [[str(p), 1] for p in paths], "more": 0}
    got = files.created_files(_run({0: [], 1: [writes]}), tmp_path)
    assert got["ranks"][1] == [".cache/state1/latest", ".cache/state1/metrics.csv",
                               ".cache/torchinductor/fxgraph/dh/epochs.csv", ".cache/torchinductor/fxgraph/dh/hidden"]
    assert got["checkpoints"][1] == [".cache/state1/latest", ".cache/torchinductor/fxgraph/dh/hidden"]
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    found = ddp.check_rank0_io(_run(recs, {"files": got, "outputs": {"ranks": {}}}), 2, 3)
    assert (found.status, found.key) == (CheckStatus.FAIL, "files") and ".cache/state1/latest" in found.params["paths"]


def test_any_file_a_rank_above_0_wrote_is_output(tmp_path):
    """Round 5: every rank appended raw float32 (rank, epoch, loss) triples to one losses.f32: not text, not named
    like a log, far smaller than the model, yet rank 1 opened it for writing and the run left it: output (a
    warning). A compiled module rank 1 wrote is not."""
    (tmp_path / "losses.f32").write_bytes(b"\x00\x00\x80?" * 6)
    (tmp_path / "ext.so").write_bytes(b"\x7fELF" + b"\0" * 20)
    w = {"type": "writes", "paths": [[str(tmp_path / "losses.f32"), 2]], "more": 0}
    w1 = {"type": "writes", "paths": [[str(tmp_path / "losses.f32"), 2], [str(tmp_path / "ext.so"), 1]], "more": 0}
    got = files.created_files(_run({0: [w], 1: [w1]}), tmp_path)
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    model = {"evaluated": True, "learned": True, "parameters": 25_000}
    found = ddp.check_rank0_io(_run(recs, {"files": got, "model": model, "outputs": {"ranks": {}}}), 2, 3)
    assert (found.status, found.key, found.params["paths"]) == (CheckStatus.WARN, "files_other", "losses.f32")
    w1["paths"] = [[str(tmp_path / "ext.so"), 1]]
    got = files.created_files(_run({0: [w], 1: [w1]}), tmp_path)
    found = ddp.check_rank0_io(_run(recs, {"files": got, "model": model, "outputs": {"ranks": {}}}), 2, 3)
    assert found.status == CheckStatus.PASS


def test_a_text_file_is_a_log_whatever_its_name(tmp_path):
    """metrics_rank1.json is rank 1's metrics, not a checkpoint its name's rank makes it: a warning named for
    what it is; a log no rank claimed whose name gives rank 1 is rank 1's output."""
    (tmp_path / "metrics_rank1.json").write_text('{"epoch": 0, "loss": 2.1034}\n')
    (tmp_path / "progress.r1").write_text("epoch 0 done\n")  # no claim, no log suffix: its content says log
    w1 = {"type": "writes", "paths": [[str(tmp_path / "metrics_rank1.json"), 1]], "more": 0}
    got = files.created_files(_run({0: [], 1: [w1]}), tmp_path)
    assert got["texts"] == ["metrics_rank1.json", "progress.r1"] and got["unclaimed"] == []
    by_rank = sync.rank_output(_run({0: [], 1: []}, {"files": got}))
    assert by_rank[1]["files"] == [] and by_rank[1]["other_files"] == ["metrics_rank1.json", "progress.r1"]
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    found = ddp.check_rank0_io(_run(recs, {"files": got, "outputs": {"ranks": {}}}), 2, 3)
    assert (found.status, found.key, found.params["n"]) == (CheckStatus.WARN, "files_other", 2)
    unlisted = {"files": {"ranks": {1: []}, "unlisted": ["outputs/deep"]}, "outputs": {"ranks": {}}}
    found = ddp.check_rank0_io(_run(recs, unlisted), 2, 3)  # not seen counts against the run
    assert (found.status, found.key, found.params["paths"]) == (CheckStatus.WARN, "files_unlisted", "outputs/deep")


def test_a_rank_that_cut_its_captured_output_is_held_to_what_it_wrote(tmp_path):
    """The sampler reads how far a rank's stdout descriptor wrote into torchrun's capture while it runs; a rank
    that then truncates the file (os.ftruncate(1, 0)) leaves it empty, but not the offset the grader saw."""
    capture = tmp_path / "logs" / "run-1" / "attempt_0" / "1"
    capture.mkdir(parents=True)
    with open(capture / "stdout.log", "w") as out, open(capture / "stderr.log", "w") as err:
        child = subprocess.Popen([sys.executable, "-c", "import os, sys, time\n"
                                  "os.write(1, b'rank 1 epoch 0: loss 2.1\\n' * 10)\n"
                                  "time.sleep(0.6)\nos.ftruncate(1, 0)\nsys.stdin.read()"],
                                 stdout=out, stderr=err, stdin=subprocess.PIPE)
    sampler = host.Sampler(lambda: {1: child.pid}, logs=str(tmp_path / "logs"))
    try:
        deadline = time.monotonic() + 30
        while (capture / "stdout.log").stat().st_size or not sampler.reached and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.6)
    finally:
        sampler.stop()
        child.communicate(b"", timeout=30)
    got = sampler.evidence(1.0)["output_reached"]
    assert got[1]["stdout"] == 25 * 10 and (capture / "stdout.log").stat().st_size == 0
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    ev = {"host": {"output_reached": got}, "outputs": outputs.rank_outputs(tmp_path / "logs", 2),
          "files": {"ranks": {1: []}}}
    found = ddp.check_rank0_io(_run(recs, ev), 2, 3)
    assert (found.status, found.key, found.params["bytes"]) == (CheckStatus.WARN, "output_erased", 250)
    ev["host"]["output_reached"] = {1: {"stdout": 0}}  # as far as the file holds: nothing erased
    assert ddp.check_rank0_io(_run(recs, ev), 2, 3).status == CheckStatus.PASS


def test_rank0_io_judged_from_outside_evidence():
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    quiet = {"outputs": {"ranks": {1: {"stdout_lines": 0, "stderr_lines": 3}}}, "files": {"ranks": {1: []}}}
    assert ddp.check_rank0_io(_run(recs, quiet), 2, 3).status == CheckStatus.PASS
    noisy = {"outputs": {"ranks": {1: {"stdout_lines": 40, "stderr_lines": 0}}}, "files": {"ranks": {1: []}}}
    got = ddp.check_rank0_io(_run(recs, noisy), 2, 3)
    assert (got.status, got.params["prints"]) == (CheckStatus.WARN, 40)
    tensorboard = {"outputs": {"ranks": {}}, "files": {"ranks": {1: ["runs/events.out.tfevents.1"]}}}
    got = ddp.check_rank0_io(_run(recs, tensorboard), 2, 3)  # not a checkpoint, but a log rank 1 wrote: output too
    assert (got.status, got.key, got.params["paths"]) == (CheckStatus.WARN, "files_other", "runs/events.out.tfevents.1")
    cache = {"outputs": {"ranks": {}}, "files": {"ranks": {1: ["__pycache__/util.cpython-312.pyc"]}}}
    assert ddp.check_rank0_io(_run(recs, cache), 2, 3).status == CheckStatus.PASS  # neither a log nor a checkpoint
    epochs = {"outputs": {"ranks": {1: {"stdout_lines": 2, "stdout_recurring": 2}}}, "files": {"ranks": {1: []}}}
    got = ddp.check_rank0_io(_run(recs, epochs), 2, 3)  # a line per epoch, whatever wrote it
    assert (got.status, got.key, got.params["recurring"]) == (CheckStatus.WARN, "prints_recurring", 2)
    on_stderr = {"outputs": {"ranks": {1: {"stderr_lines": 3, "stderr_recurring": 2}}}, "files": {"ranks": {1: []}}}
    got = ddp.check_rank0_io(_run(recs, on_stderr), 2, 3)  # sys.stderr.write each epoch: the same mistake
    assert (got.status, got.key, got.params["recurring"]) == (CheckStatus.WARN, "prints_recurring", 2)
    saved = {"outputs": {"ranks": {}}, "files": {"ranks": {1: ["checkpoint-rank1.pt"]}}}
    got = ddp.check_rank0_io(_run(recs, saved), 2, 3)
    assert (got.status, got.key, got.params["paths"]) == (CheckStatus.FAIL, "files", "checkpoint-rank1.pt")
    # a progress bar on rank 1: two line ends, forty redraws
    bar = {"outputs": {"ranks": {1: {"stderr_lines": 2, "stderr_redraws": 40, "stderr_bytes": 3000}}},
           "files": {"ranks": {1: []}}}
    got = ddp.check_rank0_io(_run(recs, bar), 2, 3)
    assert (got.status, got.key, got.params["prints"]) == (CheckStatus.WARN, "prints_redraws", 40)
    # one endless line: bytes count where line ends do not
    endless = {"outputs": {"ranks": {1: {"stdout_lines": 0, "stdout_bytes": 200_000}}}, "files": {"ranks": {1: []}}}
    got = ddp.check_rank0_io(_run(recs, endless), 2, 3)
    assert (got.status, got.key, got.params["prints"]) == (CheckStatus.WARN, "prints_bytes", 1000)
    # library warnings on stderr stay within the allowance
    warned = {"outputs": {"ranks": {1: {"stderr_lines": 20, "stderr_bytes": 4000}}}, "files": {"ranks": {1: []}}}
    assert ddp.check_rank0_io(_run(recs, warned), 2, 3).status == CheckStatus.PASS
    # a checkpoint no rank claimed: its name gives rank 1, or it gives none and is held against the run
    named = {"outputs": {"ranks": {}}, "files": {"ranks": {1: []}, "unclaimed": [["model_rank1.pt", 1]]}}
    got = ddp.check_rank0_io(_run(recs, named), 2, 3)
    assert (got.status, got.key, got.params["paths"]) == (CheckStatus.FAIL, "files", "model_rank1.pt")
    anonymous = {"outputs": {"ranks": {}}, "files": {"ranks": {1: []}, "unclaimed": [["w.bin", None]]}}
    got = ddp.check_rank0_io(_run(recs, anonymous), 2, 3)
    assert (got.status, got.key, got.params["paths"]) == (CheckStatus.WARN, "files_unclaimed", "w.bin")


def test_loose_files_judged_by_size_and_name(tmp_path):
    """Weights a writer in C left (raw floats, a database) start like no checkpoint: a file rank 0 did not
    write counts when it holds about the model's parameter bytes or its name gives a non-zero rank."""
    (tmp_path / "weights_of_b.raw").write_bytes(b"\0" * 4000)  # 1000 parameters as float32
    (tmp_path / "ckpt_rank1.db").write_bytes(b"SQLite format 3\0")
    (tmp_path / "mirror.raw").write_bytes(b"\0" * 4000)
    (tmp_path / "log.txt").write_bytes(b"epoch 1\n" * 100)  # small, rank 1 wrote it: only output
    (tmp_path / "cache.bin.part").write_bytes(b"\0" * 8000)  # rank 0's: accounted for
    w0 = {"type": "writes", "paths": [[str(tmp_path / "cache.bin.part"), 1]], "more": 0}
    w1 = {"type": "writes", "paths": [[str(tmp_path / "weights_of_b.raw"), 1], [str(tmp_path / "log.txt"), 1]],
          "more": 0}
    got = files.created_files(_run({0: [w0], 1: [w1]}), tmp_path)
    assert got["unclaimed"] == []
    evaluated = {"files": got, "model": {"evaluated": True, "learned": True, "parameters": 1000}}
    by_rank = sync.rank_output(_run({0: [], 1: []}, evaluated))
    assert sorted(by_rank[1]["files"]) == ["ckpt_rank1.db", "weights_of_b.raw"]
    assert by_rank[1]["other_files"] == ["log.txt"]
    assert sync.unclaimed_checkpoints(_run({0: [], 1: []}, evaluated)) == ["mirror.raw"]
    bigger = {"files": got, "model": {"evaluated": True, "parameters": 100_000}}  # small files: not the model
    assert sync.rank_output(_run({0: [], 1: []}, bigger))[1]["files"] == ["ckpt_rank1.db"]
    assert sync.unclaimed_checkpoints(_run({0: [], 1: []}, bigger)) == []
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    got = ddp.check_rank0_io(_run(recs, {**evaluated, "outputs": {"ranks": {}}}), 2, 3)
    assert (got.status, got.key) == (CheckStatus.FAIL, "files")

def test_one_path_every_rank_writes_is_judged_as_the_other_ranks_file(tmp_path):
    """Every rank writing raw float32 weights to the path rank 0 writes (numpy's tofile): rank 1's copy is weights,
    not output, though rank 0 wrote the path too. Every rank appending to one log stays output, and a shared file
    much larger than the weights (a data cache every rank built) is not taken for a copy of the model."""
    (tmp_path / "weights.f32").write_bytes(b"\x81" * 4000)  # 1000 parameters as float32
    (tmp_path / "train.log").write_bytes(b"epoch 1 loss 0.5\n" * 50)
    (tmp_path / "features.cache").write_bytes(b"\x81" * 40_000)  # 40 bytes a parameter
    paths = [[str(tmp_path / n), 1] for n in ("weights.f32", "train.log", "features.cache")]
    w = {r: [{"type": "writes", "paths": paths, "more": 0}] for r in (0, 1)}
    got = files.created_files(_run(w), tmp_path)
    assert got["shared_paths"] == ["features.cache", "train.log", "weights.f32"]
    evaluated = {"files": got, "model": {"evaluated": True, "learned": True, "parameters": 1000}}
    by_rank = sync.rank_output(_run({0: [], 1: []}, evaluated))[1]
    assert by_rank["files"] == ["weights.f32"]
    assert sorted(by_rank["other_files"]) == ["features.cache", "train.log"]
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    f = ddp.check_rank0_io(_run(recs, {**evaluated, "outputs": {"ranks": {}}}), 2, 3)
    assert (f.status, f.key) == (CheckStatus.FAIL, "files") and "weights.f32" in f.params["paths"]
    only_rank0 = files.created_files(_run({0: w[0], 1: []}), tmp_path)  # rank 0 alone wrote them: its own files
    assert only_rank0["shared_paths"] == [] and only_rank0["loose"] == []


def test_quantised_weights_count_as_a_model_copy_and_binary_logs_do_not(tmp_path):
    """Weights quantised to int8 (one byte per parameter, numpy's tofile) or 4 bits (half a byte) are a model copy
    on the rank that wrote them, whatever their name; a smaller binary file is not, and a TensorBoard event file,
    binary but a log by its name, is output (a warning), never weights."""
    (tmp_path / "snapshot_e0_of_2_1").write_bytes(b"\x81" * 1000)  # 1000 parameters as int8
    (tmp_path / "packed_of_b").write_bytes(b"\x81" * 500)  # 1000 parameters at 4 bits
    (tmp_path / "scratch").write_bytes(b"\x81" * 400)  # too small to hold the model at 4 bits
    (tmp_path / "events.out.tfevents.1700000000.localhost.77.0").write_bytes(b"\x81" * 6000)
    (tmp_path / "metrics").write_bytes(b"epoch,loss\n" + b"1,0.5\n" * 2000)  # text: a log, however large
    w1 = {"type": "writes", "paths": [[str(tmp_path / n), 1] for n in ("snapshot_e0_of_2_1", "packed_of_b", "scratch",
          "events.out.tfevents.1700000000.localhost.77.0", "metrics")], "more": 0}
    got = files.created_files(_run({0: [], 1: [w1]}), tmp_path)
    evaluated = {"files": got, "model": {"evaluated": True, "learned": True, "parameters": 1000}}
    by_rank = sync.rank_output(_run({0: [], 1: []}, evaluated))[1]
    assert sorted(by_rank["files"]) == ["packed_of_b", "snapshot_e0_of_2_1"]
    assert sorted(by_rank["other_files"]) == ["events.out.tfevents.1700000000.localhost.77.0", "metrics", "scratch"]
    recs = {r: [{"type": "process_group", "world": 2}, {"type": "steps", "t": [1.0], "samples": [64], "loss": [1.0],
                                                         "backwards": [1], "buckets": [1], "synced": [1],
                                                         "bucket_bytes": [4]}] for r in (0, 1)}
    f = ddp.check_rank0_io(_run(recs, {**evaluated, "outputs": {"ranks": {}}}), 2, 3)
    assert (f.status, f.key) == (CheckStatus.FAIL, "files") and "snapshot_e0_of_2_1" in f.params["paths"]
    (tmp_path / "snapshot_e0_of_2_1").unlink()
    (tmp_path / "packed_of_b").unlink()
    got = files.created_files(_run({0: [], 1: [w1]}), tmp_path)
    f = ddp.check_rank0_io(_run(recs, {"files": got, "model": evaluated["model"], "outputs": {"ranks": {}}}), 2, 3)
    assert (f.status, f.key) == (CheckStatus.WARN, "files_other")  # the logs left: output, not a model copy


def test_host_sampler_reads_this_process():
    assert host.cpu_seconds(os.getpid()) is not None
    sampler = host.Sampler(lambda: {0: os.getpid()})
    sampler.stop()
    got = sampler.evidence(1.5)
    assert got["wall_s"] == 1.5 and 0 in got["cpu_s"]
    assert got["loopback"]["seen"] is False  # the test shares the grader's network namespace


def test_model_trained_or_not_scored_on_held_out_data(tmp_path):
    """The evaluation script alone (the grader runs it sandboxed): a trained model passes the
    floor under any of the usual normalisations, an untrained one stays at chance."""
    import torch

    from tests.fixtures.starter_model import fit, make_model
    data = model.write_held_out(tmp_path / "held.npz", {"seed": 0}, 300)
    train = model.write_held_out(tmp_path / "train.npz", {"seed": 0}, 300)  # same classes, another draw is fine here
    arrays = __import__("numpy").load(train)
    net = fit(arrays["x"], arrays["y"])  # the script's own normalisation, which the grader does not know
    torch.save({"module." + k: v for k, v in net.state_dict().items()}, tmp_path / "trained.pt")
    torch.save({f"param.{i}": p.detach() for i, p in enumerate(make_model().parameters())}, tmp_path / "fresh.pt")
    torch.save({"w": torch.zeros(3)}, tmp_path / "other.pt")
    out = subprocess.run([sys.executable, str(model.SCRIPT), str(ROOT / "assignments/ddp_speedup/starter/train.py"),
                          "make_model", str(data), str(tmp_path / "trained.pt"), "--", str(tmp_path / "fresh.pt"), "--",
                          str(tmp_path / "other.pt")],  # one group per run: the first file that fits is scored
                         capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    trained, fresh, other = (got[str(tmp_path / n)] for n in ("trained.pt", "fresh.pt", "other.pt"))
    assert trained["accuracy"] >= 0.4, trained  # the floor is 0.3; chance 0.1
    assert fresh["accuracy"] < 0.3, fresh  # chance is 0.1
    assert other == {"evaluated": False, "why": "names or shapes differ from the assignment's model"}


def test_weights_of_a_class_of_the_students_own_are_fitted_by_position(tmp_path):
    """The same layers under other names, or without BatchNorm: scored by order and shape, and said so."""
    import torch

    from tests.fixtures.starter_model import fit
    data = model.write_held_out(tmp_path / "held.npz", {"seed": 0}, 300)
    arrays = __import__("numpy").load(model.write_held_out(tmp_path / "train.npz", {"seed": 0}, 300))
    net = fit(arrays["x"], arrays["y"])
    torch.save({f"features.layer{i}": v for i, v in enumerate(net.state_dict().values())}, tmp_path / "renamed.pt")
    plain = torch.nn.Sequential(*[m for m in net if not isinstance(m, torch.nn.BatchNorm2d)])
    names = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc.weight", "fc.bias"]
    torch.save(dict(zip(names, (p.detach() for p in plain.parameters()))), tmp_path / "no_bn.pt")
    out = subprocess.run([sys.executable, str(model.SCRIPT), str(ROOT / "assignments/ddp_speedup/starter/train.py"),
                          "make_model", str(data), str(tmp_path / "renamed.pt"), "--", str(tmp_path / "no_bn.pt")],
                         capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    renamed, no_bn = got[str(tmp_path / "renamed.pt")], got[str(tmp_path / "no_bn.pt")]
    assert renamed["by_position"] and renamed["accuracy"] >= 0.4 and "by position" in renamed["how"], renamed
    assert no_bn["by_position"] and no_bn["evaluated"] and "no BatchNorm" in no_bn["how"], no_bn


def test_a_model_that_learned_nothing_means_no_training():
    recs = {r: [{"type": "steps", "t": [1.0, 2.0], "samples": [64, 128], "loss": [2.3, 0.4], "backwards": [1, 1],
                 "buckets": [1, 1], "synced": [1, 1], "bucket_bytes": [4, 4]}, {"type": "finished", "steps": 40}]
            for r in (0, 1)}
    untrained = {"model": {"evaluated": True, "accuracy": 0.11, "min_accuracy": 0.3, "learned": False}}
    flat = {r: [{**recs[r][0], "loss": [2.3, 2.31]}, recs[r][1]] for r in (0, 1)}
    for claimed in (recs, flat):  # a loss that falls and a loss held flat at ln 10 are both the script's choice
        run = _run(claimed, untrained)
        assert not ddp.trained(run)
        got = ddp.check_run(run)
        assert (got.status, got.key, got.params["acc"]) == (CheckStatus.FAIL, "model_untrained", "11%")
    stopped = _run(recs, untrained)
    stopped.stopped = "not distributed"  # the grader cut the training short itself: the floor does not apply
    assert ddp.trained(stopped)


def test_a_model_the_grader_cannot_score_holds_the_grading():
    recs = {r: [{"type": "steps", "t": [1.0], "samples": [64], "loss": [0.4], "backwards": [1], "buckets": [1],
                 "synced": [1], "bucket_bytes": [4]}, {"type": "finished", "steps": 40, "process_group": 2}]
            for r in (0, 1)}
    why = {"zh": "参数名或形状与作业的模型不同", "en": "names or shapes differ from the assignment's model"}
    run = _run(recs, {"model": {"evaluated": False, "why": why}})
    assert ddp.trained(run) and model.unscored(run) == why
    got = ddp.check_run(run)
    assert (got.status, got.key, got.params["why"]) == (CheckStatus.PASS, "ok_unscored", why)
    real = _run(recs, {"model": {"evaluated": False, "real_data": True, "why": why}})
    assert model.unscored(real) is None  # the real CIFAR-10: no held-out data of the grader's own


def test_parameters_that_never_move_mean_no_training():
    steps = {"type": "steps", "t": [1.0], "samples": [64], "loss": [None], "backwards": [0], "buckets": [0],
             "synced": [0], "bucket_bytes": [0]}
    frozen = {0: [steps, _params(1, "a"), _params(2, "a"), _params(40, "a", final=True), {"type": "finished", "steps": 40}],
              1: [steps, {"type": "finished", "steps": 40}]}
    run = _run(frozen)
    assert sync.params_frozen(run) and not ddp.trained(run)
    assert ddp.check_run(run).key == "params_frozen"
    moving = {0: [steps, _params(1, "a"), _params(2, "b")], 1: [steps]}
    assert not sync.params_frozen(_run(moving))
    assert not sync.params_frozen(_run({0: [steps, _params(1, "a")], 1: [steps]}))  # one step: nothing to compare


def test_the_harness_dump_counts_only_if_rank_0_reported_those_bytes(tmp_path):
    import hashlib
    chan, work = tmp_path / "chan", tmp_path / "work"
    chan.mkdir()
    work.mkdir()
    (chan / model.HARNESS_FILE).write_bytes(b"weights")
    (work / "checkpoint.pt").write_bytes(b"ckpt")
    left = files.scan(work)
    told = RankStream(0, records=[{"type": "model", "saved": True, "sha256": hashlib.sha256(b"weights").hexdigest()}])
    assert model.candidates(chan, work, left, told) == [chan / model.HARNESS_FILE, work / "checkpoint.pt"]
    planted = RankStream(0, records=[{"type": "model", "saved": False, "source": "error: FileExistsError"}])
    assert model.candidates(chan, work, left, planted) == [work / "checkpoint.pt"]


WRITES_SCRIPT = r"""
import json, os, sys, tempfile
import torch
from distgrade_harness import witness
w = witness.Writes("/nonexistent")
w.install()
d = sys.argv[1]
with tempfile.NamedTemporaryFile(dir=d, delete=False) as tmp:  # an atomic save: a temporary name, then os.replace
    torch.save({"a": 1}, tmp)
os.replace(tmp.name, os.path.join(d, "last.pt"))
torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), os.path.join(d, "scripted.pt"))  # opened in C++
import sqlite3
sqlite3.connect(os.path.join(d, "store.db")).close()  # sqlite opens its file in C
print(json.dumps(w.record()))
"""


def test_writes_follow_renames_and_torchscript(tmp_path):
    """The harness claims what an atomic save moved into place and what TorchScript's C++ writer opened."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "graders/harness"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", WRITES_SCRIPT, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    paths = {os.path.basename(p) for p, _ in json.loads(proc.stdout.strip().splitlines()[-1])["paths"]}
    assert {"last.pt", "scripted.pt", "store.db"} <= paths


def _under_floor_runs():
    """A 2-rank run that never synchronised (each rank's parameters drift) and whose model the grader scored at 12%,
    and its 1-process run that learned."""
    steps = {"type": "steps", "t": [1.0, 2.0], "samples": [64, 128], "loss": [2.3, 2.3], "backwards": [1, 1],
             "buckets": [0, 0], "synced": [0, 0], "bucket_bytes": [0, 0], "hand_reduced": [0.0, 0.0]}
    end = {"type": "finished", "steps": 40, "process_group": 2, "model_source": "optimizer"}
    ranks = {r: [steps, _params(1, "a"), _params(2, f"d{r}", sums=[1.0 + r, 2.0]),
                 {**end, "digest": f"z{r}", "param_sums": [1.0 + r, 2.0]}] for r in (0, 1)}
    run_n = _run(ranks, {"model": {"evaluated": True, "accuracy": 0.12, "min_accuracy": 0.3, "learned": False}})
    one = _run({0: [steps, _params(1, "a"), _params(2, "b"), {**end, "digest": "b", "param_sums": [1.0, 2.0]}]},
               {"model": {"evaluated": True, "accuracy": 0.8, "min_accuracy": 0.3, "learned": True}}, nproc=1)
    return one, run_n


def test_under_the_model_floor_each_check_keeps_its_own_cause_and_earns_nothing():
    """Below the floor nothing earns points, but a check that fails by its own evidence still says why and how
    to fix it (the cause first), and one whose own part looked right says so and that it earns nothing."""
    from coursework import assignments
    from graders.ddp_speedup import grader as ddp_speedup
    from graders.checks.render import render
    cfg = assignments.load("ddp_speedup").raw
    run1, run_n = _under_floor_runs()
    found = ddp_speedup._findings(cfg, run1, run_n, 2, None, "cpu")
    got = {cid: render(cfg["checks"][cid], cid, f) for cid, f in found.items()}
    assert all(c.points == 0 for cid, c in got.items() if cid != "run.single"), {c.id: c.points for c in got.values()}
    assert got["run.distributed"].evidence["key"] == "model_untrained"
    sync_check = got["ddp.grad_sync"]
    assert sync_check.status == CheckStatus.FAIL and sync_check.evidence["key"].startswith("no_ddp")
    assert "differed from rank 0's" in sync_check.message["en"].split("learned nothing")[0], sync_check.message["en"]
    assert "DistributedDataParallel" in sync_check.message["en"] and "DistributedDataParallel" in sync_check.message["zh"]
    for lang in ("en", "zh"):
        assert "12%" in sync_check.message[lang] and "30%" in sync_check.message[lang]
    io = got["io.rank0_only"]  # nothing printed or saved on rank 1: its own part was right
    assert io.status == CheckStatus.FAIL and io.points == 0
    assert io.message["en"].startswith("This part looked right on its own") and "learned nothing" in io.message["en"]
    assert io.message["zh"].startswith("这一项本身看起来没问题") and "12%" in io.message["zh"]
    assert got["batch.global"].evidence["key"] == "model_untrained"  # information only: nothing of its own to say


def test_a_metadata_pickle_naming_many_globals_is_refused_not_grown_into(tmp_path, monkeypatch):
    """A .metadata of a few MiB can name a million distinct globals (STACK_GLOBAL over memoised strings); the
    grader made a class for each stand-in, so the student's file decided how much the grader grew. Stand-ins are
    made once per name, and a pickle naming more than ``MAX_GLOBALS`` is unreadable."""
    made = []
    real_type = type

    def counting_type(*args):
        if len(args) == 3:
            made.append(args[0])
        return real_type(*args)
    monkeypatch.setattr(dcp, "type", counting_type, raising=False)
    ops = [b"\x80\x04", b"\x8c\x01m\x94"]  # protocol 4; the module name "m", memoised at 0
    n = 20_000
    for i in range(n):  # GLOBAL m.gI, then pop it
        ops += [b"h\x00", b"\x8c" + bytes([len(str(i)) + 1]) + b"g" + str(i).encode(), b"\x93", b"0"]
    ops += [b"}", b"."]  # an empty dict: no state_dict_metadata
    (tmp_path / "many").write_bytes(b"".join(ops))
    assert len(b"".join(ops)) < dcp.MAX_METADATA_BYTES
    got = dcp.read_metadata(tmp_path / "many")
    assert got["error"].startswith("unreadable") and len(made) <= dcp.MAX_GLOBALS


def test_the_cuda_drivers_jit_cache_is_a_compilers_folder(tmp_path):
    """HOME is the work folder, so the CUDA driver's JIT cache lands in .nv/ComputeCache, written from C (no rank
    claims it) and as large as the kernels it compiled: a compiler's folder like inductor's, not a checkpoint nobody
    claimed. A saved model beside it, in .nv itself, still counts."""
    cache = tmp_path / ".nv" / "ComputeCache" / "a" / "3"
    cache.mkdir(parents=True)
    (cache / "9f0c1e2d4b5a6978").write_bytes(bytes(range(256)) * 4096)  # 1 MiB of a format of the driver's own
    (tmp_path / ".nv" / "weights").write_bytes(b"PK\x03\x04" + b"\0" * 20)
    got = files.created_files(_run({0: [], 1: []}), tmp_path)
    assert got["unclaimed"] == [[".nv/weights", None]]
    assert [f[0] for f in got["loose"]] == []  # a loose file no rank wrote counts by its size against the model's
