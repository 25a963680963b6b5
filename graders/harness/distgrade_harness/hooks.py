"""What the grader observes in a rank, and how it is sent.

* DataLoader: the batch indices fetched in the main process (``_next_index``),
  of which the first ``yielded`` batches were actually consumed; one record per
  iterator pass (an "epoch"), keyed by the dataset object.
* The module that learns (``trained``): the one whose forward took the training batches and whose
  backward ran. Its parameters are the ones digested, counted and dumped, not an optimizer's list.
* Optimizer steps (global post-hook), or where no optimizer ever steps, changes of the trained
  parameters between two backward passes: time, samples consumed, loss of the last backward, the
  trained parameters' digest, backward passes and gradient all-reduce buckets since the previous step,
  the main thread's run-queue wait (time it was ready but the host's CPUs were busy), its
  CPU time, and the time spent inside ``DataLoader.__next__``.
* DDP construction: the model, its (Sync)BatchNorm layers and a counting comm hook.
* The process group (``init_process_group``, or found initialised at a step), the
  (Sync)BatchNorm layers of the trained modules and of every optimizer (with or without DDP), and gradients
  all-reduced by hand (``dist.all_reduce`` on a ``.grad`` between two steps).
* BatchNorm forwards with gradients on once training began, by what they normalised with (``bn_calls``): a
  layer however its input is passed, and ``torch.batch_norm`` (``F.batch_norm``) called in training outside a
  layer's own forward, as a plain one.
* A per-rank view of the data (``Subset``, or a tutorial-style ``Partition`` holding an
  index list into a larger data set): indices are sent in the base data set's numbering.
* On synthetic data: which samples entered the model in each step, read from the marks the grader
  wrote into every image (``marks``) at the first module a training batch reaches, whatever
  loaded it (a DataLoader, a sampler that lies, plain tensor indexing), in train or eval mode:
  a forward's marks count once a backward follows it.
* ``torch.save`` calls, ``print`` calls and ``logging`` records from the student's own
  code (not libraries), the uncaught exception, and at exit the
  parameter digest plus the "finished" marker, sent *before* the extra
  barrier + destroy_process_group that avoids gloo's teardown abort.
"""
from __future__ import annotations

import builtins
import hashlib
import logging
import os
import sys
import time
import traceback
import warnings
import weakref

import torch
import torch.distributed as dist
from torch.nn.modules.batchnorm import SyncBatchNorm, _BatchNorm
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import dataloader as dl

from distgrade_harness import contrib, marks, syncbn, trained, witness

_ALL_REDUCE = dist.all_reduce  # the original, for the grader's own comm hook
_BATCH_NORM = torch.batch_norm  # the original, called by the counting wrapper (``F.batch_norm`` calls it)
# Bound before student code runs: a script that replaces ``time.monotonic``, ``open`` or ``hashlib.sha256`` on
# the shared modules must not feed the step times, the CPU readings or the parameter digest.
_monotonic, _open, _sha256 = time.monotonic, builtins.open, hashlib.sha256
MAX_PENDING_REDUCES = 4096
STEP_FLUSH = 25  # steps per record: bounded memory, and most data survives a kill
MAX_SEEN = 8192  # samples read per step; more are counted as unread
MAX_PRINT_STEPS = 64  # prints/log records whose step is kept (a rank printing while it trains shows in far fewer)
_ON_GPU = os.environ.get("DISTGRADE_MODE") == "gpu"


class _Epoch:
    """One pass of a DataLoader iterator over its sampler."""

    def __init__(self, key: int, number: int, it):
        self.key, self.number = key, number
        self.batches: list[list[int]] = []
        self.yielded = 0
        self.closed = False
        self.kind = "iterable" if it._dataset_kind == dl._DatasetKind.Iterable else "map"
        self.meta = {"dataset": type(it._dataset).__name__, "num_workers": it._num_workers,
                     "drop_last": bool(it._drop_last),
                     "sampler": type(getattr(it._index_sampler, "sampler", it._index_sampler)).__name__,
                     "persistent_workers": bool(getattr(it, "_persistent_workers", False))}
        try:
            self.meta["dataset_len"] = len(it._dataset)
        except TypeError:
            self.meta["dataset_len"] = None
        self.index_map = None
        if self.kind == "map":
            key = id(it._dataset)
            if key not in _VIEWS:  # once per data set: the index list is walked in full
                _VIEWS[key] = global_view(it._dataset)
                if _VIEWS[key][0] is not None:  # which base samples the view holds: ranks that split differently differ
                    _VIEWS[key] += (_sha256(repr(_VIEWS[key][0]).encode()).hexdigest()[:16],)
            self.index_map, base_len, view = _VIEWS[key][:3]
            if self.index_map is not None:
                self.meta.update(dataset_len=base_len, view=view[:200], local_len=self.meta["dataset_len"],
                                 view_digest=_VIEWS[key][3])


MAX_VIEW_DEPTH = 4
_VIEWS: dict[int, tuple] = {}  # id(dataset) -> global_view(dataset); the Observer keeps datasets alive
_INDEX_TYPES = (list, tuple, range)


def _as_index_list(value, n: int) -> list[int] | None:
    """``value`` as a list of ``n`` ints if it is a 1-D integer sequence of that length, else None."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 1 or value.is_floating_point() or value.is_complex() or value.numel() != n:
            return None
        return [int(i) for i in value.tolist()]
    if type(value).__name__ == "ndarray" and getattr(value, "ndim", 0) == 1 and value.dtype.kind in "iu":
        return [int(i) for i in value.tolist()] if len(value) == n else None
    if isinstance(value, _INDEX_TYPES) and len(value) == n:
        if isinstance(value, range):
            return list(value)
        if all(isinstance(i, int) and not isinstance(i, bool) for i in value):
            return list(value)
    return None


def global_view(ds, depth: int = 0):
    """(index map, base length, description) when ``ds`` is a view of a larger data set, else (None, None, None).

    ``torch.utils.data.Subset`` and any object holding exactly one distinct-int index list of
    its own length plus one larger indexable data set (the tutorial's ``Partition(data, index)``)
    are followed, so that two ranks' local indices 0..n-1 are compared as the base samples
    they stand for. Anything else keeps its own numbering.
    """
    try:
        n = len(ds)
    except Exception:
        return None, None, None
    inner, index = None, None
    if isinstance(ds, torch.utils.data.Subset):
        inner, index = ds.dataset, _as_index_list(ds.indices, n)
    else:
        attrs = getattr(ds, "__dict__", {})
        indices = [(k, _as_index_list(v, n)) for k, v in attrs.items() if not k.startswith("__")]
        indices = [(k, v) for k, v in indices if v is not None]
        datas = []
        for k, v in attrs.items():
            if any(v is x for _, x in indices) or not hasattr(v, "__getitem__") or isinstance(v, (str, bytes)):
                continue
            try:
                if len(v) > n:
                    datas.append(v)
            except Exception:
                continue
        if len(indices) == 1 and len(datas) == 1:
            index, inner = indices[0][1], datas[0]
    if index is None or inner is None:
        return None, None, None
    try:
        base_len = len(inner)
    except Exception:
        return None, None, None
    if len(set(index)) != len(index) or (index and (min(index) < 0 or max(index) >= base_len)):
        return None, None, None  # labels or repeats, not a view
    view = type(ds).__name__
    if depth < MAX_VIEW_DEPTH:
        deeper, deeper_len, deeper_view = global_view(inner, depth + 1)
        if deeper is not None:
            return [deeper[i] for i in index], deeper_len, f"{view} -> {deeper_view}"
    return index, base_len, f"{view} -> {type(inner).__name__}"


class Observer:
    """Installs the hooks of one rank and streams what they see."""

    def __init__(self, stream, rank: int):
        self.stream, self.rank = stream, rank
        self.datasets: dict[int, object] = {}  # id -> dataset, kept alive so ids stay unique
        self.epoch_counts: dict[int, int] = {}
        self.open_epochs: list[_Epoch] = []
        self.consumed: dict[int, int] = {}  # dataset key -> samples consumed so far
        self.last_key: int | None = None
        self.steps: list[list] = []
        self.step_count = 0
        self.backwards = self.buckets = self.synced = self.bucket_bytes = 0
        self.last_loss = None
        self.models: list[torch.nn.Module] = []
        self.comm_slots: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # DDP -> [state, student hook]
        self.optimizers: list[torch.optim.Optimizer] = []
        self.prints = 0
        self.print_steps: list[int] = []  # optimizer steps taken at each print()/log record (the first MAX_PRINT_STEPS)
        self.log_records = 0
        self.print_tail: list[str] = []
        self.exception: dict | None = None
        self.process_group = 0  # world size of the default process group once one is seen
        self.pending_reduces: list[tuple] = []  # (data_ptr, numel, sum after a synchronous call, a trained
        # parameter's gradient when called: known at once where no optimizer steps) since the step
        self.flat_min = 1 << 62  # half the optimizer's parameter count, once the first step has shown it
        self.grad_reduced = 0.0  # fraction of the parameters' gradient elements all-reduced by hand
        self.norms: "weakref.WeakSet" = weakref.WeakSet()
        self.bn_sent = False
        # Training forwards of BatchNorm layers since the first step, by what they normalised with: [every rank's
        # statistics (a SyncBatchNorm whose group spans the world), the rank's own (plain), a SyncBatchNorm whose
        # group at that call reaches fewer ranks]. Layers are counted once, at the wrap and the first step; a group
        # changed later, or a BatchNorm no trained module holds, shows only here; so does ``batch_norm`` called
        # in training outside a BatchNorm layer's forward (counted as plain: nothing synchronises it).
        self.bn_calls = [0, 0, 0]
        self.bn_depth = 0  # BatchNorm layers whose forward is running (their own batch_norm call is theirs)
        self.data_wait = 0.0  # seconds spent inside DataLoader.__next__ (loading, or waiting for workers)
        self.writes = witness.Writes(os.environ.get("DISTGRADE_CHANNEL", "/nonexistent"))  # graders.evidence
        self.modules = witness.Modules()
        self.digests = 0
        self.reading = os.environ.get("DISTGRADE_SYNTHETIC_DATA") == "1"  # the data carries marks
        self.seen: list[int] = []  # marks read since the last step
        self.unread = 0  # training samples whose mark could not be read
        self.last_input: tuple | None = None  # (weak reference, version) of the last tensor read
        self.pending: list[int] = []  # marks read at the last training forward, until its backward
        self.pending_root = None  # weak reference to the module that took the first batch of ``pending``
        self.trained = trained.Trained()  # the modules that took the training batches (graders.checks.sync)
        self.hand_digest: bytes | None = None  # the trained parameters' digest at the last backward, no optimizer yet
        self.step_depth = 0  # optimizer steps begun and not yet returned
        self.backward_in_step = False  # a backward ran since the outermost of them began
        self.open_row: list | None = None  # the last step's row until its span ends (``_settle_step``)
        self.sketcher = contrib.Sketcher()  # what each rank contributed and applied (graders.checks.contrib)
        self.local_grad: list | None = None  # sketch of the gradients when the last backward returned
        self.local_norm: float | None = None  # and their squared norm
        self.applied_grad: list | None = None  # sketch of the gradients as the outermost optimizer step began
        self.bucket_sq: list = []  # squared norms of DDP's buckets before the all-reduce, since the last step
        self.bucket_zero: list = []  # gradient tensors all zero in those buckets
        self.local_zero: int | None = None  # gradient tensors all zero when the last backward returned
        self.reduced_bytes = 0  # bytes handed to a world-spanning all_reduce since the last step

    # -- installation -------------------------------------------------------------
    def install(self) -> None:
        """Patch torch and builtins; each patch calls the original."""
        syncbn.install()
        self.writes.install()
        self.modules.install()
        self._hook_dataloader()
        self._hook_ddp()
        self._hook_optim()
        self._hook_backward()
        self._hook_io()
        self._hook_process_group()
        self._hook_norms()
        self._hook_inputs()
        previous = sys.excepthook

        def excepthook(etype, value, tb):
            self._record_exception(etype, value, tb)
            previous(etype, value, tb)
        sys.excepthook = excepthook

    def _hook_dataloader(self) -> None:
        obs, base = self, dl._BaseDataLoaderIter
        next_index, reset, next_ = base._next_index, base._reset, base.__next__

        def _next_index(it):
            idx = next_index(it)
            ep = it.__dict__.get("_dg_epoch")
            if ep is None:
                ep = it._dg_epoch = obs._open_epoch(it)
            if ep.kind == "map":
                ep.batches.append([int(i) for i in idx] if isinstance(idx, (list, tuple))
                                  else [int(idx)])
            return idx

        def _reset(it, *args, **kwargs):
            ep = it.__dict__.pop("_dg_epoch", None)
            if ep is not None:
                obs._close_epoch(ep, complete=False)
            return reset(it, *args, **kwargs)

        def __next__(it):
            started = _monotonic()
            try:
                data = next_(it)
            except StopIteration:
                ep = it.__dict__.pop("_dg_epoch", None)
                if ep is not None:
                    obs._close_epoch(ep, complete=True)
                raise
            finally:
                obs.data_wait += _monotonic() - started
            ep = it.__dict__.get("_dg_epoch")
            if ep is not None:
                n = len(ep.batches[ep.yielded]) if ep.yielded < len(ep.batches) else 0
                ep.yielded += 1
                obs.consumed[ep.key] = obs.consumed.get(ep.key, 0) + n
                obs.last_key = ep.key
            return data

        base._next_index, base._reset, base.__next__ = _next_index, _reset, __next__

    def _open_epoch(self, it) -> _Epoch:
        key = id(it._dataset)
        self.datasets[key] = it._dataset
        for ep in [e for e in self.open_epochs if e.key == key]:
            self._close_epoch(ep, complete=False)  # e.g. a next(iter(loader)) peek
        number = self.epoch_counts.get(key, 0)
        self.epoch_counts[key] = number + 1
        ep = _Epoch(key, number, it)
        self.open_epochs.append(ep)
        return ep

    def _close_epoch(self, ep: _Epoch, complete: bool) -> None:
        if ep.closed:
            return
        ep.closed = True
        if ep in self.open_epochs:
            self.open_epochs.remove(ep)
        consumed = ep.batches[:ep.yielded]
        m = ep.index_map
        if m is not None:
            consumed = [[m[i] if 0 <= i < len(m) else i for i in b] for b in consumed]
        self.stream.send({"type": "epoch", "loader": ep.key, "epoch": ep.number, "kind": ep.kind,
                          "complete": complete, "batches": len(consumed),
                          "batch_size": max((len(b) for b in consumed), default=0),
                          "indices": [i for b in consumed for i in b], **ep.meta})
        if complete and ep.key == self.last_key:  # the training epoch ended: its steps leave now, not at exit,
            self._flush_steps(settle=False)       # which a rank SIGTERMed after a peer's crash never reaches

    def _hook_ddp(self) -> None:
        obs, init = self, DistributedDataParallel.__init__
        register = DistributedDataParallel.register_comm_hook

        def __init__(ddp, *args, **kwargs):
            init(ddp, *args, **kwargs)
            obs._on_ddp(ddp, register)

        def register_comm_hook(ddp, state, hook):
            slot = obs.comm_slots.get(ddp)
            if slot is None:
                return register(ddp, state, hook)
            slot[:] = [state, hook]  # the student's hook runs inside the counting one
            obs.stream.send({"type": "comm_hook", "name": f"{getattr(hook, '__module__', '')}."
                             f"{getattr(hook, '__qualname__', '')}"[:120]})  # compression lowers the traffic floor
            ddp._comm_hooks.append((hook, state))  # what DDP itself records (and pickles), as without the grader
        DistributedDataParallel.__init__ = __init__
        DistributedDataParallel.register_comm_hook = register_comm_hook

    def _on_ddp(self, ddp, register) -> None:
        module = ddp.module
        self.models.append(module)
        bn = [m for m in module.modules() if isinstance(m, _BatchNorm)]
        lone = _lone_sync(bn)
        sync = sum(isinstance(m, SyncBatchNorm) for m in bn) - lone
        self.stream.send({"type": "ddp", "batchnorm": len(bn) - sync, "syncbatchnorm": sync, "syncbn_lone": lone,
                          "parameters": sum(p.numel() for p in module.parameters()),
                          "device": str(next(module.parameters()).device)})
        slot = self.comm_slots[ddp] = []  # beside the module, not in it: nothing of ours is pickled with it
        obs, pg = self, ddp.process_group

        def counting_hook(state, bucket):
            obs.buckets += 1
            if len(obs.bucket_sq) < 4096:  # this rank's own gradients, before any rank's are reduced into them
                obs.bucket_sq.append(torch.linalg.vector_norm(bucket.buffer().detach()).double().square())  # a reduction
                try:  # kept on the device until the step: no synchronisation inside DDP's backward
                    obs.bucket_zero.append(contrib.zero_tensors(bucket.gradients(), lazy=True))
                except Exception:  # an odd bucket: its zeros are not counted
                    pass
            obs.bucket_bytes += bucket.buffer().numel() * bucket.buffer().element_size()
            if bucket.is_last():
                obs.synced += 1
            if slot:
                return slot[1](slot[0], bucket)
            buf = bucket.buffer().div_(dist.get_world_size(pg))
            fut = _ALL_REDUCE(buf, group=pg, async_op=True).get_future()
            return fut.then(lambda f: f.value()[0])
        register(ddp, None, counting_hook)
        # DDP keeps (hook, state) in ``_comm_hooks`` and pickles it with the module: a local closure there made
        # ``torch.save(ddp_model)`` fail only under the grader. The reducer holds the hook; forget it here.
        hooks = ddp.__dict__.get("_comm_hooks")
        if isinstance(hooks, list):
            hooks[:] = [h for h in hooks if h[0] is not counting_hook]

    def _hook_optim(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        register_optimizer_step_pre_hook(self._on_step_pre)
        register_optimizer_step_post_hook(self._on_step)

    def _on_step_pre(self, optimizer, args, kwargs) -> None:
        """An optimizer step begins: one begun inside another's step is part of that step."""
        if not self.step_depth:
            self.backward_in_step = False
            try:  # the gradients this step applies, whatever collective (or none) made them
                self.applied_grad = self.sketcher.sketch([p.grad for p in self._params()])
            except Exception:
                self.applied_grad = None
        self.step_depth += 1

    def _on_step(self, optimizer, args, kwargs) -> None:
        """An optimizer step returned. The parameters are compared when the outermost step returns: a wrapper
        such as ZeRO steps a shard with an inner optimizer, then broadcasts it, so the ranks match only then.
        A step nested in a span where a backward ran (a training loop inside a step, or an outer step that
        raised and never returned) is a training step of its own and is compared at once."""
        self.step_depth = max(self.step_depth - 1, 0)
        if optimizer is not None and not any(o is optimizer for o in self.optimizers):
            self.optimizers.append(optimizer)
            self.stream.send({"type": "optimizer", "class": type(optimizer).__name__,
                              "lr": [g.get("lr") for g in optimizer.param_groups][:8]})
        if self.step_depth and not self.backward_in_step:
            return
        self._record_step(defer=True)

    def _record_step(self, defer: bool = False) -> None:
        """One training step: its counters, its time and the trained parameters' digest. ``defer``: an optimizer's
        step, whose parameters (and the all-reduces that synchronised them) are read when the step span ends, at
        the next forward of the trained module or the next backward (``_settle_step``): a script that averages
        its parameters after ``step()`` (for plain SGD the same update as DDP) has synchronised them only then."""
        self._settle_step()
        if len(self.steps) >= STEP_FLUSH:
            self._flush_steps()
        if _ON_GPU and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # honest step times on an asynchronous device
        now = _monotonic()
        if not self.process_group and dist.is_available() and dist.is_initialized():
            self._on_process_group()
        if not self.bn_sent:
            self._send_norms(self._params())
        key = self.last_key
        row = [now, self.consumed.get(key, 0) if key is not None else 0, self.last_loss,
               self.backwards, self.buckets, self.synced, self.bucket_bytes, 0.0, *_schedstat(), self.data_wait,
               self.seen, self.unread, None, self._contribution()]  # the digest (13) comes when the step settles
        row[7] = self._hand_reduced(self._params())  # now: the next zero_grad drops the gradients it reads
        self.steps.append(row)
        self.seen, self.unread, self.pending = [], 0, []
        self.step_count += 1
        self.backwards = self.buckets = self.synced = self.bucket_bytes = 0
        self.last_loss = None
        self.open_row = row
        if not defer:
            self._settle_step()

    def _settle_step(self) -> None:
        """The step span ended: the trained parameters as the ranks now hold them, and the share of their
        gradients (or of themselves) all-reduced by hand since the step before."""
        row, self.open_row = self.open_row, None
        if row is None:
            return
        params = self._params()
        row[7] = max(row[7], self._hand_reduced(params))  # the parameters averaged after the step count too
        row[14]["ps"] = self._sketch_params(params)
        row[13] = self._witness_step(params)

    def _contribution(self) -> dict:
        """This step's sketches (``contrib``): local and applied gradients, the parameters right after the step,
        the local gradient's squared norm (DDP's buckets before their all-reduce where DDP reduced), and the bytes
        all-reduced since the last step."""
        norm, zero = self.local_norm, self.local_zero
        if self.bucket_sq:
            try:
                norm = float(sum(t.item() for t in self.bucket_sq))
                zero = int(sum(t.item() for t in self.bucket_zero))
            except Exception:
                norm = zero = None
        out = {"gl": self.local_grad, "ga": self.applied_grad, "pl": self._sketch_params(self._params()),
               "gn": norm if norm is None or norm == norm and norm != float("inf") else None, "gz": zero,
               "ar": self.reduced_bytes}
        self.local_grad = self.applied_grad = self.local_norm = self.local_zero = None
        self.bucket_sq, self.bucket_zero, self.reduced_bytes = [], [], 0
        return out

    def _sketch_params(self, params) -> list | None:
        try:
            return self.sketcher.sketch(params)
        except Exception:
            return None

    def _params(self) -> list:
        """The parameters judged: the trained modules' (``trained``), else every optimizer's (the grader is told)."""
        return self.trained.params() or witness.stepped_params(self.optimizers)

    def _source(self) -> str:
        return "trained" if self.trained.modules() else ("optimizer" if self.optimizers else "none")

    def _witness_step(self, params) -> str:
        """The trained parameters' digest of this step, compared across ranks at steps the grader draws
        after the run (graders.checks.sync); the full record at a few steps, for a readable difference."""
        rows = witness.param_rows(params)
        if witness.digest_step(self.step_count) and self.digests < witness.MAX_DIGESTS:
            self.digests += 1
            self.stream.send(witness.params_record(params, self.step_count, rows, self._source()))
        return witness.short_digest(rows)

    def _hand_step(self) -> None:
        """Where no optimizer ever stepped, trained parameters changed since the last backward are a step by hand."""
        if self.optimizers:
            return
        params = self.trained.params()
        if not params:
            return
        digest = witness.short_digest(witness.param_rows(params))
        if self.hand_digest is not None and digest != self.hand_digest:
            pending = self.pending  # marks of the forward whose backward is about to run: not this step's
            self._record_step()
            self.pending = pending
        self.hand_digest = digest

    def _flush_steps(self, settle: bool = True) -> None:
        """Send the recorded steps. ``settle=False`` keeps back the step whose span is still open (it is settled
        and sent later), for a flush between an optimizer's step and the next forward."""
        if settle:
            self._settle_step()
        keep = [self.open_row] if self.open_row is not None and self.steps and self.steps[-1] is self.open_row else []
        rows, self.steps = self.steps[:len(self.steps) - len(keep)], keep
        if not rows:
            return
        losses = [r[2] for r in rows]
        if any(isinstance(x, torch.Tensor) for x in losses):
            losses = [float(x) if isinstance(x, torch.Tensor) else x for x in losses]
        self.stream.send({"type": "steps", "t": [r[0] for r in rows], "samples": [r[1] for r in rows],
                          "loss": losses, "backwards": [r[3] for r in rows],
                          "buckets": [r[4] for r in rows], "synced": [r[5] for r in rows],
                          "bucket_bytes": [r[6] for r in rows], "hand_reduced": [r[7] for r in rows],
                          "runqueue": [r[8] for r in rows], "cpu": [r[9] for r in rows],
                          "data_wait": [round(r[10], 6) for r in rows], "pd": [r[13] for r in rows],
                          **{k: [r[14].get(k) for r in rows] for k in ("gl", "ga", "pl", "ps", "gn", "gz", "ar")},
                          **({"seen": [r[11] for r in rows], "unread": [r[12] for r in rows]} if self.reading else {})})
        if any(self.bn_calls):
            self.stream.send({"type": "bn_calls", "counts": list(self.bn_calls)})

    def _hook_process_group(self) -> None:
        """Note the default process group when it is created, and count all_reduce calls."""
        from torch.distributed import distributed_c10d as c10d
        obs, init = self, c10d.init_process_group

        def init_process_group(*args, **kwargs):
            out = init(*args, **kwargs)
            obs._on_process_group()
            return out

        def all_reduce(tensor, *args, **kwargs):
            out = _ALL_REDUCE(tensor, *args, **kwargs)
            group = kwargs.get("group", args[1] if len(args) > 1 else None)
            if not _spans_world(group):
                return out  # a reduction on a smaller group (new_group([rank])) synchronises nothing
            if isinstance(tensor, torch.Tensor):
                obs.reduced_bytes += tensor.numel() * tensor.element_size()
            if isinstance(tensor, torch.Tensor) and len(obs.pending_reduces) < MAX_PENDING_REDUCES:
                # A flattened gradient buffer must add up like the grads: a synchronous call's result is summed
                # now; an overlapped one's (async_op=True) lands when the script waits, so it is summed at the step.
                total: float | torch.Tensor | None = None
                if tensor.numel() >= obs.flat_min and tensor.is_floating_point():
                    if out is None:
                        with torch.no_grad():
                            total = float(tensor.detach().double().sum())
                    else:
                        total = tensor
                obs.pending_reduces.append((tensor.data_ptr(), tensor.numel(), total, obs._is_grad(tensor)))
            return out
        init_process_group.__wrapped__ = init
        all_reduce.__wrapped__ = _ALL_REDUCE
        for mod in (dist, c10d):
            mod.init_process_group = init_process_group
            mod.all_reduce = all_reduce

    def _on_process_group(self) -> None:
        if self.process_group:
            return
        try:
            self.process_group = dist.get_world_size()
            backend = str(dist.get_backend())
        except Exception:  # an unusual group; the step hook tries again
            return
        self.stream.send({"type": "process_group", "world": self.process_group, "backend": backend[:40]})

    def _hand_reduced(self, params) -> float:
        """Fraction of the trained parameters' gradient elements all-reduced by hand since the last step.

        A call counts when its tensor is a parameter's ``.grad`` (``dist.all_reduce(p.grad)``), or
        when it is at least half of all gradient elements at once (a flattened buffer).
        """
        pending, self.pending_reduces = self.pending_reduces, []
        if not pending:
            return 0.0
        with torch.no_grad():  # overlapped calls: the buffer as the script left it after waiting
            pending = [(ptr, n, float(s.detach().double().sum()) if isinstance(s, torch.Tensor) else s, hit)
                       for ptr, n, s, hit in pending]
        grads = {}
        total = 0
        with torch.no_grad():
            for p in params:
                total += p.numel()
                grads[p.data_ptr()] = p.numel()  # the parameters averaged in place after the step: the same update
                if p.grad is not None:
                    grads[p.grad.data_ptr()] = p.grad.numel()
        if not total:
            return 0.0
        self.flat_min = max(1, total // 2)
        flat = [(n, s) for ptr, n, s, _ in pending if ptr not in grads and n >= total / 2]
        if flat:  # a flattened buffer counts only if it adds up like the gradients or, averaged after the step and
            with torch.no_grad():  # copied back, like the parameters (summed or averaged)
                sums = [sum(float(p.grad.detach().double().sum()) for p in params if p.grad is not None),
                        sum(float(p.detach().double().sum()) for p in params)]
            world = dist.get_world_size() if dist.is_initialized() else 1
            flat = [(n, s) for n, s in flat if s is not None and any(
                abs(s / k - want) <= 1e-3 * max(abs(want), abs(s / k), 1e-6) for k in (1, world) for want in sums)]
        done = sum(n for ptr, n, _, hit in pending if hit or ptr in grads) + sum(n for n, _ in flat)
        return round(min(done / total, 1.0), 3)

    def _is_grad(self, tensor) -> bool:
        """Whether ``tensor`` is a trained parameter's gradient, asked when it is all-reduced. Only where no
        optimizer steps: a step by hand is seen at the next backward, after ``zero_grad`` dropped the gradients."""
        if self.optimizers:
            return False
        ptr = tensor.data_ptr()
        return any(p.grad is not None and p.grad.data_ptr() == ptr for p in self.trained.params())

    def _hook_norms(self) -> None:
        """Remember every normalisation layer built, to count the ones the optimizer trains."""
        from torch.nn.modules.batchnorm import _NormBase
        obs, init = self, _NormBase.__init__

        def __init__(module, *args, **kwargs):
            init(module, *args, **kwargs)
            try:
                obs.norms.add(module)
            except TypeError:
                pass
        _NormBase.__init__ = __init__

        def batch_norm(*args, **kwargs):
            # A hand-written forward calling F.batch_norm on a converted layer's weight and buffers with
            # training=True normalises with this rank's statistics alone, and the layer module is never called.
            training = args[5] if len(args) > 5 else kwargs.get("training", False)
            if training and obs.bn_sent and not obs.bn_depth and torch.is_grad_enabled() and not _compiling():
                obs.bn_calls[1] += 1
            return _BATCH_NORM(*args, **kwargs)
        batch_norm.__wrapped__ = _BATCH_NORM
        try:  # TorchScript resolves torch.batch_norm by name (a scripted BatchNorm layer): it must script as the op
            from torch.jit import _builtins
            _builtins._register_builtin(batch_norm, "aten::batch_norm")
        except Exception:  # no such table in this torch: no wrapper, rather than a script that cannot be scripted
            return
        torch.batch_norm = batch_norm

    def _send_norms(self, params) -> None:
        """(Sync)BatchNorm layers of the trained modules, and those whose weights any optimizer steps (a second
        optimizer for the norms included): DDP or not, SyncBN or not, affine or not."""
        self.bn_sent = True
        inside = {id(m) for t in self.trained.modules() for m in t.modules()}
        stepped = {id(p) for p in params} | {id(p) for p in witness.stepped_params(self.optimizers)}
        bn = [m for m in list(self.norms) if isinstance(m, _BatchNorm) and (id(m) in inside or (
              getattr(m, "weight", None) is not None and id(m.weight) in stepped))]
        lone = _lone_sync(bn)
        sync = sum(isinstance(m, SyncBatchNorm) for m in bn) - lone
        # BatchNorm written by hand (F.batch_norm over its own running statistics) is not a _BatchNorm, so
        # convert_sync_batchnorm leaves it alone: its running_mean/running_var buffers still say what it is.
        hand = sum(1 for t in self.trained.modules() for m in t.modules()
                   if not isinstance(m, _BatchNorm) and _running_stats(m))
        in_ddp = {id(p) for m in self.models for p in m.parameters()}
        sharded = any(type(p).__name__ in ("DTensor", "FlatParameter") or hasattr(p, "_local_tensor")
                      for p in params)  # FSDP2 DTensors, FSDP1 flat parameters: gradients reduce-scattered
        self.stream.send({"type": "norms", "batchnorm": len(bn) - sync + hand, "syncbatchnorm": sync, "syncbn_lone": lone,
                          "sharded": sharded,
                          "stepped": len(params), "in_ddp": sum(id(p) in in_ddp for p in params),
                          "source": self._source()})

    def _hook_inputs(self) -> None:
        """Read the marks of every training batch where it enters the model: at the first module
        called with it (a global pre-hook; nested modules get the same tensor and are skipped)."""
        obs, reader = self, (marks.Reader() if self.reading else None)

        def pre(module, args):
            if isinstance(module, _BatchNorm):  # counted however its input is passed (``layer(input=x)``)
                obs.bn_depth += 1
                if obs.bn_sent and torch.is_grad_enabled() and not _compiling():
                    obs._count_norm(module)
            if not args or not isinstance(args[0], torch.Tensor) or not torch.is_grad_enabled():
                return None
            x = args[0]
            try:
                if torch.compiler.is_compiling():
                    return None
                if obs.open_row is not None and id(module) in obs.trained.counts:
                    obs._settle_step()  # the trained module's next forward: the last step's span ended
                if trained.is_batch(x) and next(module.parameters(), None) is None:
                    return None  # a module without parameters (nn.Identity, a normalising step) learns nothing
                obs.trained.pre(module, x)  # which module learns, whatever its flag says (a backward decides)
                if reader is None:  # module.training is not asked: a forward a backward follows is training
                    return None
                if x.dim() not in (2, 4) or x.shape[-1] not in (marks.SIZE, 3 * marks.SIZE * marks.SIZE):
                    return None
                last = obs.last_input[0]() if obs.last_input is not None else None
                if last is x and obs.last_input[1] == x._version:  # a freed batch's memory reused, or a
                    return None  # buffer refilled in place, is a new batch; the same tensor passed down is not
                obs.last_input = (weakref.ref(x), x._version)
                got = reader.read(x)
            except Exception:  # an odd tensor (meta, sharded): nothing read, the student's forward goes on
                return None
            if got is not None:  # counted once a backward follows: a forward without one trained nothing
                root = obs.pending_root() if obs.pending_root is not None else None
                # the same model under another wrapper (DDP and the module inside it, a compiled module) is no
                # other consumer, and neither is the same batch shown again: a stray forward replaces itself
                inside = root is not None and (trained.unwrap(root) is trained.unwrap(module) or
                                               id(module) in obs.trained._subtree(root))
                if obs.pending and root is not None and not inside and got != obs.pending:
                    obs.pending = (obs.pending + got)[:MAX_SEEN]  # another consumer's batch: every one counts
                else:  # a batch read again inside the model (after a normalising layer) replaces itself
                    if not (obs.pending and inside):
                        obs.pending_root = weakref.ref(module)
                    obs.pending = got
            return None

        def post(module, args, output):
            if isinstance(module, _BatchNorm):
                obs.bn_depth = max(obs.bn_depth - 1, 0)
            return None
        register = torch.nn.modules.module.register_module_forward_pre_hook
        register_post = torch.nn.modules.module.register_module_forward_hook
        handle, compile_ = register(pre), torch.compile
        handle_post = register_post(post, always_call=True)  # a forward that raises leaves no depth behind

        def compile(*args, **kwargs):
            # Compiled code would trace the hook (and import this package again): once the script
            # compiles, the hook runs outside the graph. Importing dynamo costs ~1 s, so only then.
            nonlocal handle
            if handle is not None:
                handle.remove()
                handle_post.remove()
                handle = None
                register(torch.compiler.disable(pre))
                register_post(torch.compiler.disable(post), always_call=True)
                warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
            return compile_(*args, **kwargs)
        torch.compile = compile

    def _count_norm(self, module) -> None:
        """A BatchNorm layer's forward with gradients on, once training began: what its statistics span."""
        if not (module.training or module.running_mean is None):
            return  # running statistics: nothing of this batch is normalised with
        if not isinstance(module, SyncBatchNorm):
            self.bn_calls[1] += 1
        else:
            self.bn_calls[0 if _spans_world(getattr(module, "process_group", None)) else 2] += 1

    def _count_read(self) -> None:
        """The last forward's marks, now that a backward trained on them (bounded per step)."""
        got, self.pending = self.pending, []
        room = max(MAX_SEEN - len(self.seen), 0)
        read = [i for i in got if i >= 0]
        self.seen.extend(read[:room])
        self.unread += len(got) - min(len(read), room)

    def _on_backward(self, tensors) -> None:
        """A backward (``backward()`` or ``torch.autograd.grad``) is about to run from ``tensors``."""
        self._settle_step()  # the last step's span ends at the latest here
        self.trained.backward()  # first: the first backward already names the module a step by hand changes
        self.backward_in_step = self.backward_in_step or self.step_depth > 0
        self._hand_step()
        self.backwards += 1
        if self.pending:
            self._count_read()
        if isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
            loss = tensors.detach()
            self.last_loss = loss if loss.is_cuda else float(loss)  # no sync per step on GPU

    def _after_backward(self) -> None:
        """The backward returned: this rank's local gradients (under DDP already averaged), before any
        collective the script runs on them by hand."""
        try:
            if torch.compiler.is_compiling():
                return
            grads = [p.grad for p in self._params()]
            self.local_grad = self.sketcher.sketch(grads)
            self.local_norm = contrib.squared_norm(grads)
            self.local_zero = contrib.zero_tensors(grads)
        except Exception:  # an odd gradient (sparse, sharded): no sketch, the grader judges without it
            self.local_grad = self.local_norm = self.local_zero = None

    def _hook_backward(self) -> None:
        obs, backward, grad = self, torch.autograd.backward, torch.autograd.grad

        def hooked_grad(outputs, *args, **kwargs):
            # Gradients taken without backward() (torch.autograd.grad, then p.grad = g by hand) train the module
            # fed just as much: the same bookkeeping, the marks read at its forward included. torch.compile's
            # AOTAutograd calls it too, on fake tensors while it traces the backward graph: that trains nothing
            # (and a fake loss has no value to read), the compiled backward that runs later is counted.
            if not torch.compiler.is_compiling():
                obs._on_backward(outputs)
            return grad(outputs, *args, **kwargs)
        torch.autograd.grad = hooked_grad

        def hooked(tensors, *args, **kwargs):
            obs._on_backward(tensors)
            out = backward(tensors, *args, **kwargs)
            obs._after_backward()
            return out
        torch.autograd.backward = hooked

    def _note_print(self) -> None:
        if len(self.print_steps) < MAX_PRINT_STEPS:
            self.print_steps.append(self.step_count)

    def _hook_io(self) -> None:
        obs, save, print_ = self, torch.save, builtins.print

        def hooked_save(obj, f, *args, **kwargs):
            where = os.fspath(f) if isinstance(f, (str, os.PathLike)) else type(f).__name__
            obs.stream.send({"type": "save", "path": str(where)[:300], "step": obs.step_count})
            return save(obj, f, *args, **kwargs)

        def hooked_print(*args, **kwargs):
            if kwargs.get("file") in (None, sys.stdout, sys.stderr):
                obs.prints += 1
                obs._note_print()
                if len(obs.print_tail) < 5 or obs.prints % 50 == 0:
                    line = " ".join(str(a) for a in args)[:200]
                    obs.print_tail = (obs.print_tail + [line])[-5:]
            return print_(*args, **kwargs)
        handle = logging.Logger.handle

        def hooked_handle(logger, record):  # called only for records at an enabled level
            if not _is_library(record.pathname):  # torch's own logging is not the student's output
                obs.log_records += 1
                obs._note_print()
            return handle(logger, record)
        torch.save = hooked_save
        builtins.print = hooked_print
        logging.Logger.handle = hooked_handle

    # -- the end of the run -----------------------------------------------------
    def _record_exception(self, etype, value, tb) -> None:
        if etype is KeyboardInterrupt or self.exception is not None:
            return
        frames = traceback.extract_tb(tb)
        own = [f for f in frames if not _is_library(f.filename)]
        where = own[-1] if own else (frames[-1] if frames else None)
        self.exception = {"type": "exception", "exc_type": etype.__name__,
                          "message": str(value)[:1500], "step": self.step_count,
                          "line": where.lineno if where else None,
                          "code": (where.line or "")[:200] if where else "",
                          "traceback": "".join(traceback.format_exception(etype, value, tb))[-4000:]}
        self._flush_all()
        self.stream.send(self.exception)

    def _flush_all(self) -> None:
        for ep in list(self.open_epochs):
            self._close_epoch(ep, complete=False)
        self._flush_steps()
        self.stream.send(self.writes.record())
        self.stream.send({"type": "prints", "count": self.prints, "logging": self.log_records,
                          "at_steps": self.print_steps, "tail": self.print_tail})

    def at_exit(self) -> None:
        """Send the remaining records and the end marker, then tear down gloo cleanly."""
        if os.getpid() != self.stream.pid:
            return
        if self.exception is None:
            self._witness_exit()
            self._flush_all()
            self.stream.send({"type": "finished", "steps": self.step_count, "process_group": self.process_group,
                              **self._digest()})
        self.stream.close()
        if self.exception is None and dist.is_available() and dist.is_initialized():
            try:  # the barrier first: destroy alone still aborts now and then on torch 2.13 gloo
                dist.barrier()
                dist.destroy_process_group()
            except Exception:  # teardown only; the verdict is already sent
                pass

    def _witness_exit(self) -> None:
        """The final parameters compared across ranks, and rank 0's model for the grader's evaluation."""
        self.writes.on = False  # what the harness writes from here on is not the student's
        self._settle_step()
        self._hand_step()  # a last update by hand after the last backward
        params = self._params()
        if self.step_count and params and self.digests < witness.MAX_DIGESTS + 1:
            self.stream.send({**witness.params_record(params, self.step_count, witness.param_rows(params),
                                                      self._source()), "final": True})
        if self.rank == 0 and self.step_count and params:
            try:
                owner = self.trained.model() or self.modules.owner(params)
                path = os.path.join(os.environ.get("DISTGRADE_CHANNEL", "."), "model-rank0.pt")
                self.stream.send(witness.save_model(path, params, owner))
            except Exception as exc:  # the grader sees no model and says why
                self.stream.send({"type": "model", "saved": False, "source": f"error: {type(exc).__name__}"[:80]})

    def _digest(self) -> dict:
        params = self._params() or [p for m in self.models for p in m.parameters()]
        h = _sha256()
        sums = []
        with torch.no_grad():
            for p in params:
                t = p.detach()
                t = (t.to_local() if hasattr(t, "to_local") else t).to("cpu").contiguous()  # DTensor: own shard
                h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
                sums.append(float(t.double().sum()))
        return {"digest": h.hexdigest(), "param_sums": sums[:64], "param_tensors": len(params),
                "model_source": self._source()}


def _running_stats(module) -> bool:
    """Whether ``module`` keeps batch-norm running statistics of its own (its buffers, not a child's)."""
    own = getattr(module, "_buffers", None) or {}
    return isinstance(own.get("running_mean"), torch.Tensor) and isinstance(own.get("running_var"), torch.Tensor)


def _compiling() -> bool:
    """Whether dynamo is tracing (the counting hooks then run outside the graph, or not at all)."""
    try:
        return torch.compiler.is_compiling()
    except Exception:  # an odd build without the compiler: nothing is traced
        return False


def _lone_sync(layers) -> int:
    """SyncBatchNorm layers whose process group does not reach every rank: they normalise like plain BatchNorm."""
    return sum(isinstance(m, SyncBatchNorm) and not _spans_world(getattr(m, "process_group", None)) for m in layers)


def _spans_world(group) -> bool:
    """Whether a collective on ``group`` (None: the default group) reaches every rank."""
    if group is None:
        return True
    try:
        return dist.get_world_size(group) == dist.get_world_size()
    except Exception:  # not a member, or no default group: it synchronises nothing we can count
        return False


def _schedstat() -> tuple[float | None, float | None]:
    """(run-queue wait, CPU time) of this rank's main thread so far, in seconds (``/proc/self/schedstat``).

    The wait (ready, but the host's CPUs were busy) subtracted from step times takes the host's
    load out of a throughput; CPU time against what remains tells computing from sleeping.
    """
    try:
        with _open("/proc/self/schedstat", "rb") as f:
            fields = f.read().split()
        return int(fields[1]) / 1e9, int(fields[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None, None


def _is_library(filename: str) -> bool:
    return ("site-packages" in filename or "/lib/python" in filename
            or "distgrade_harness" in filename or filename.startswith("<"))
