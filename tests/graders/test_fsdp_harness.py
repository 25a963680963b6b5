"""The FSDP observer and its live-bytes counter inside a real (1-process, gloo) FSDP2 job.

Runs in a subprocess: the counter is a process-wide dispatch mode and patches
``UntypedStorage.resize_``, which must not leak into the test process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys
sys.path.insert(0, os.environ["STARTER"])
from distgrade_harness import fsdp, fsdp_memory
import torch

class Stream:
    pid = os.getpid()
    def __init__(self): self.records = []
    def send(self, r): self.records.append(r)

out = {}
stream = Stream()
obs = fsdp.install(stream, 0)
counter = fsdp_memory._active

a = torch.zeros(1000)
v = a.view(10, 100)
out["view_shares"] = counter.live
del a
out["view_keeps"] = counter.live
del v
out["freed"] = counter.live
w = torch.empty(256)
base = counter.live
w.untyped_storage().resize_(0)
out["resized_to_0"] = base - counter.live
del w

# a dispatch mode is thread-local: threads started afterwards count into the same counter
import threading, _thread
counter.reset_peak()
def work():
    t = torch.zeros(250_000)
th = threading.Thread(target=work)
th.start(); th.join()
out["thread_peak"] = counter.reset_peak()
done = threading.Event()
def raw():
    t = torch.zeros(250_000)
    done.set()
threading._start_new_thread(raw, ())  # the reference threading keeps, not the module attribute
done.wait()
out["raw_thread_peak"] = counter.reset_peak()

import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
import model as starter
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(0)
x, y = starter.make_dataset("tiny")[0]
decoy = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))  # a root that runs once
for layer in decoy:
    fully_shard(layer)
fully_shard(decoy)
decoy(torch.ones(1, 4)).sum().backward()
m = starter.build_model("tiny")
for b in m.blocks:
    fully_shard(b)
fully_shard(m)
opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
for i in range(2):
    loss = m(x[None], y[None])
    stream.send({"type": "script_loss", "loss": float(loss)})
    (loss * 0.5 ** i).backward()  # what the script hands to backward is scaled; the model's own loss is not
    opt.step()
    opt.zero_grad()
for i in range(2):  # zero_grad forgotten: the third step begins clean, the fourth on the third's gradients
    loss = m(input_ids=x[None], labels=y[None])  # by keyword (Hugging Face's style): the rows are read all the same
    stream.send({"type": "script_loss", "loss": float(loss)})
    loss.backward()
    opt.step()
obs.at_exit()
torch.save({"w": torch.ones(10)}, os.path.join(os.environ["TMP"], "x.pt"))
out["records"] = stream.records
print(json.dumps(out))
"""


def test_observer_in_a_one_rank_fsdp2_job(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "graders/harness"), "OMP_NUM_THREADS": "1", "TMP": str(tmp_path),
           "STARTER": str(ROOT / "assignments/fsdp_fit/starter"), "DISTGRADE_MODE": "cpu"}
    env.pop("DISTGRADE_CHANNEL", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["view_shares"] == 4000 and out["view_keeps"] == 4000 and out["freed"] == 0
    assert out["resized_to_0"] == 1024
    assert out["thread_peak"] >= 1_000_000 and out["raw_thread_peak"] >= 1_000_000
    recs = {}
    for r in out["records"]:
        recs.setdefault(r["type"], []).append(r)
    assert [m["root"] for m in recs["fsdp_model"]] == [0, 1]  # the decoy, then the model that trains
    assert {m["root"] for m in recs["fsdp_mem"]} == {1}  # every step names the model with the most forwards
    model = recs["fsdp_model"][1]
    assert model["global_params"] == 6_584_832 and len(model["fsdp2_units"]) == 9
    assert {u["reshard_after_forward"] for u in model["fsdp2_units"] if u["name"] != "(root)"} == {True}
    assert recs["fsdp_optimizer"][0]["in_model"] == recs["fsdp_optimizer"][0]["params"] == 100
    step = recs["fsdp_mem"][-1]
    psi_bytes = 4 * 6_584_832
    assert step["params"] == psi_bytes and step["grads"] == psi_bytes  # one rank: its shard is everything
    assert 2 * psi_bytes <= step["optimizer"] <= 2 * psi_bytes + 1000  # two AdamW moments and step counters
    assert step["peak"] >= step["params"] + step["grads"] + step["optimizer"] == step["measured"]
    assert [round(m["model_loss"], 5) for m in recs["fsdp_mem"]] == [round(r["loss"], 5) for r in recs["script_loss"]]
    # the same sample fed every step: the same row digest; the gradient the backward sent into the model's output
    # (the loss scaled by 0.5 ** i); the gradients left over from the step before, where zero_grad() was forgotten
    rows = [m["rows"] for m in recs["fsdp_mem"]]
    assert len(rows) == 4 and all(r == rows[0] for r in rows) and len(rows[0]) == 1 and len(rows[0][0]) == 12
    assert [m["out_grad"] for m in recs["fsdp_mem"]] == [1.0, 0.5, 1.0, 1.0]
    assert [m["grads_left"] for m in recs["fsdp_mem"]] == [None, False, False, True]
    assert len(model["param_shapes"]) == 100 and ["tok.weight", [1024, 256]] in model["param_shapes"]
    assert ["blocks.7.qkv.weight", [768, 256]] in model["param_shapes"]  # global shapes, not the shards
    end = recs["fsdp_end"][0]
    assert end["sum_before"] != end["sum_after"]
    assert recs["fsdp_save"][0]["bytes"] == 40 and recs["fsdp_save"][0]["devices"] == ["cpu"]


# the observer of a rank, its records kept in ``stream.records`` (the scripts below print them last)
OBSERVER = r"""class Stream:
    pid = os.getpid()
    def __init__(self): self.records = []
    def send(self, r): self.records.append(r)

stream = Stream()
obs = fsdp.install(stream, 0)
"""

TRAINED = r"""
import json, os, sys
sys.path.insert(0, os.environ["STARTER"])
from distgrade_harness import fsdp
import torch
from torch.utils.data import DataLoader
from torch.utils._python_dispatch import _disable_current_modes

""" + OBSERVER + r"""import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
import model as starter
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(0)
decoy = starter.build_model("tiny")  # sharded, called twice per step on one token
for b in decoy.blocks:
    fully_shard(b)
fully_shard(decoy)
decoy_opt = torch.optim.AdamW(decoy.parameters(), lr=1e-4)
m = starter.build_model("tiny")  # plain: the model that takes the batches
frozen = m.pos.weight
opt = torch.optim.AdamW([p for p in m.parameters() if p is not frozen], lr=3e-3)  # one parameter left out
loss_fn = torch.nn.CrossEntropyLoss()  # a parameterless root of its own: passed through
tok = torch.zeros(1, 1, dtype=torch.long)
loader = DataLoader(starter.make_dataset("tiny"), batch_size=2)
for step, (x, y) in zip(range(3), loader):
    aux = decoy(tok, tok) + decoy(tok, tok)
    logits = m(x)
    loss = loss_fn(logits.flatten(0, 1), y.flatten())
    stream.send({"type": "script_loss", "loss": float(loss)})
    (loss + 1e-6 * aux).backward()
    decoy_opt.step(); decoy_opt.zero_grad()
    opt.step(); opt.zero_grad()
with _disable_current_modes():  # the memory counter switched off
    m(x, y).backward()
    m(x, y).backward()
obs.at_exit()
print(json.dumps(stream.records))
"""


def _records_by_type(script: str, tmp_path: Path) -> dict[str, list]:
    """Run ``script`` (it prints the observer's records last) outside any grading job: its records by type."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "graders/harness"), "OMP_NUM_THREADS": "1", "TMP": str(tmp_path),
           "STARTER": str(ROOT / "assignments/fsdp_fit/starter"), "DISTGRADE_MODE": "cpu"}
    env.pop("DISTGRADE_CHANNEL", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs: dict[str, list] = {}
    for r in json.loads(proc.stdout.strip().splitlines()[-1]):
        recs.setdefault(r["type"], []).append(r)
    return recs


def test_the_model_that_trained_took_the_batches_and_the_counter_saw_it(tmp_path: Path) -> None:
    recs = _records_by_type(TRAINED, tmp_path)
    roots = {r["root"]: r for r in recs["fsdp_model"]}
    assert len(roots) == 2 and not roots[1]["fsdp2_units"]  # the loss module is no root
    assert {m["root"] for m in recs["fsdp_mem"]} == {1}  # the plain model took the batches, not the busier decoy
    assert recs["fsdp_mem"][-1]["trained"] == [1]
    # the model returned logits: the harness's cross-entropy against the batch's labels is the script's loss
    assert [round(m["model_loss"], 4) for m in recs["fsdp_mem"]] == [round(r["loss"], 4) for r in recs["script_loss"]]
    assert [m["model_forwards"] for m in recs["fsdp_mem"]] == [1, 1, 1]
    assert recs["fsdp_blind"][0]["where"] == "GPT"
    end = recs["fsdp_end"][0]
    assert end["stale"] == 1 and end["stale_names"] == ["pos.weight"]


IMPOSTOR = r"""
import json
from distgrade_harness import fsdp_memory
import torch
from torch.utils._python_dispatch import _disable_current_modes

class Silent(fsdp_memory._ThreadMode):  # a subclass of the counting mode that counts nothing
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

counter = fsdp_memory.start()
out = {"on": fsdp_memory.counting_here()}
with _disable_current_modes():
    out["off"] = fsdp_memory.counting_here()
    with Silent(counter):
        before = counter.live
        t = torch.zeros(250_000)
        out["impostor_counted"] = counter.live - before
        out["impostor"] = fsdp_memory.counting_here()
print(json.dumps(out))
"""


def test_only_the_counting_mode_itself_counts_as_on() -> None:
    """A subclass of the counting mode, holding the same counter, pushed where the real one was popped: it
    counts nothing, so the counter is off there (an isinstance test would have called it on)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "graders/harness"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", IMPOSTOR], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"on": True, "off": False, "impostor_counted": 0, "impostor": False}


SILENCED = r"""
import json
from distgrade_harness import fsdp_memory
import torch

counter = fsdp_memory.start()
out = {"on": fsdp_memory.counting_here()}
with torch._C._DisableTorchDispatch():  # the mode stays on the stack; the Python key that reaches it is excluded
    before = counter.live
    t = torch.zeros(250_000)
    out["silenced_counted"] = counter.live - before
    out["silenced"] = fsdp_memory.counting_here()
keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)
with torch._C._ExcludeDispatchKeyGuard(keys):
    out["excluded"] = fsdp_memory.counting_here()
out["after"] = fsdp_memory.counting_here()
print(json.dumps(out))
"""


def test_a_counter_left_on_the_stack_but_excluded_from_dispatch_is_off() -> None:
    """``torch._C._DisableTorchDispatch()`` keeps the counting mode on the stack and sends no op to it: the
    counter is off there, as where the modes were popped."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "graders/harness"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", SILENCED], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"on": True, "silenced_counted": 0, "silenced": False, "excluded": False, "after": True}


UNWOUND = r"""
import functools, json, os, sys
sys.path.insert(0, os.environ["STARTER"])
from distgrade_harness import fsdp
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)

""" + OBSERVER + r"""import model as starter
torch.manual_seed(0)
x, y = starter.make_dataset("tiny")[0]
m = starter.build_model("tiny")
block = type(m.blocks[0])
# non-reentrant checkpointing: in the backward each block's forward runs again and PyTorch stops it early by
# raising once it has the tensors it needs, so the block's post-hook never runs
apply_activation_checkpointing(m, checkpoint_wrapper_fn=functools.partial(
    checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT), check_fn=lambda mod: isinstance(mod, block))
opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
for i in range(3):
    if i == 1:
        try:  # a forward that raises inside the model (a token id past the vocabulary), caught by the script
            m(torch.full_like(x[None], 10 ** 6), y[None])
        except IndexError:
            pass
    loss = m(x[None], y[None])
    stream.send({"type": "script_loss", "loss": float(loss)})
    loss.backward()
    opt.step()
    opt.zero_grad()
print(json.dumps(stream.records))
"""


def test_a_forward_that_never_returns_leaves_the_next_one_outermost(tmp_path: Path) -> None:
    """A forward pre-hook without its post-hook (a block's recomputation that activation checkpointing stops
    early in the backward, an exception the script catches) must not leave the model's next forward taken for
    a nested one: every step still reads the model's own loss, its input rows and the gradient at its output."""
    recs = _records_by_type(UNWOUND, tmp_path)
    mems = recs["fsdp_mem"]
    assert {m["root"] for m in mems} == {0} and mems[-1]["trained"] == [0]
    assert [round(m["model_loss"], 5) for m in mems] == [round(r["loss"], 5) for r in recs["script_loss"]]
    assert [m["model_forwards"] for m in mems] == [1, 1, 1]
    # the same sample every step (the forward that raised was read at its start, before it)
    assert mems[0]["rows"] and all(m["rows"][-1] == mems[0]["rows"][0] for m in mems)
    assert [m["out_grad"] for m in mems] == [1.0, 1.0, 1.0]


TAGGED = r"""
import hashlib, json, os, sys
sys.path.insert(0, os.environ["STARTER"])
from distgrade_harness import fsdp
import torch
from torch.utils.data import DataLoader

""" + OBSERVER + r"""import torch.distributed as dist
import model as starter
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(0)


class Tagged(torch.nn.Module):  # forward(tag, input_ids, labels): the first tensor is a per-step tag
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, tag, input_ids, labels):
        return self.inner(input_ids, labels)


m = Tagged(starter.build_model("tiny"))
opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
x, y = next(iter(DataLoader(starter.make_dataset("tiny"), batch_size=2)))
for step in range(3):  # the same batch every step, behind a tag that differs every step
    loss = m(torch.tensor([[step]]), x, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
stream.send({"type": "batch_rows", "rows": [hashlib.blake2b(r.numpy().tobytes(), digest_size=6).hexdigest() for r in x]})
print(json.dumps(stream.records))
"""


def test_the_rows_digested_are_the_dataloaders_batch_not_a_tag_before_it(tmp_path: Path) -> None:
    """A wrapper whose first argument is a per-step (or per-rank) tag: the rows the harness compares are those of
    the DataLoader's batch among the forward's tensors, so the same batch every step reads as the same rows."""
    recs = _records_by_type(TAGGED, tmp_path)
    want = recs["batch_rows"][0]["rows"]
    assert [m["rows"] for m in recs["fsdp_mem"]] == [want] * 3
