"""What the FSDP homework grader observes in a rank (on only when ``DISTGRADE_FSDP=1``).

* The model: every outermost module whose forward runs (global forward hooks, a stack per thread
  of the forwards running, unwound when a forward returns or raises), read once at its first
  forward, before FSDP's lazy initialisation: FSDP2 units (``fully_shard``) and FSDP1 units
  (``FullyShardedDataParallel``) with their parameter counts and sharding, or a DDP wrapper;
  each such root has a number (``root``). Modules without parameters (a loss module, a wrapper
  holding the model outside its submodules) are passed through, so the model they call is the
  root. The one that trained is the root that took the
  DataLoader's batches and whose outputs a backward ran through (then: a backward at all, the most
  parameters), never the one called most often: a sharded decoy called twice per step on one
  token does not stand in for the model that learned. Every step record names it, and lists
  every root that trained (``trained``).
* Memory per optimizer step: the peak since the previous step (``LiveBytes`` on CPU,
  ``torch.cuda.max_memory_allocated`` on GPU) and the local bytes of parameters,
  gradients and optimizer states (unique storages, so a shard counts as a shard).
* Training: whether the optimizer's tensors are the model's parameters and have
  gradients; sums of the parameters before the first and after the last step.
* Checkpoints: what each ``torch.save`` holds (bytes, devices, sharded or full), DCP
  saves, and the state-dict options used to gather it.
* GPU mode: the simulated card (``DISTGRADE_CAPACITY_BYTES``) as a per-process memory
  fraction; on an out-of-memory error, the numbers at that moment.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading

import torch
import torch.nn as nn
from torch.utils._pytree import tree_leaves

from distgrade_harness import fsdp_memory, order

_ON_GPU = os.environ.get("DISTGRADE_MODE") == "gpu"
MAX_ROOTS = 16  # outermost modules described per rank
MAX_ROWS = 64  # input rows digested per optimizer step
# Bound before student code runs: a script that replaces hashlib's functions must not choose the row digests.
_blake2b = hashlib.blake2b


def _unique_bytes(tensors, seen: set[int], device: str | None = None) -> int:
    """Bytes of the storages behind ``tensors``, each once (only those on ``device`` if given)."""
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        for st in fsdp_memory.storages_of(t):
            if st._cdata not in seen and (device is None or st.device.type == device):
                seen.add(st._cdata)
                total += st.nbytes()
    return total


def _fsdp2_units(root: nn.Module) -> list[dict]:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return []
    units = []
    for name, m in root.named_modules():
        if not isinstance(m, FSDPModule):
            continue
        state = m._get_fsdp_state()
        groups = getattr(state, "_fsdp_param_groups", None) or [getattr(state, "_fsdp_param_group", None)]
        numel = reshard = 0
        for g in groups:
            if g is None:
                continue
            numel += sum(p._orig_size.numel() for p in g.fsdp_params)
            reshard += g.post_forward_mesh_info is not None
        units.append({"name": name or "(root)", "params": numel, "reshard_after_forward": bool(reshard),
                      "api": "fully_shard"})
    return units


def _fsdp1_units(root: nn.Module) -> list[dict]:
    from torch.distributed.fsdp import FullyShardedDataParallel
    units = []
    for name, m in root.named_modules():
        if isinstance(m, FullyShardedDataParallel):
            flat = getattr(m, "_flat_param", None)
            numel = flat._unpadded_unsharded_size.numel() if flat is not None else 0
            units.append({"name": name or "(root)", "params": numel, "strategy": m.sharding_strategy.name,
                          "api": "FullyShardedDataParallel"})
    return units


def _global_numel(root: nn.Module, fsdp1: list[dict]) -> int:
    if fsdp1:
        return sum(u["params"] for u in fsdp1)
    return sum(p.numel() for p in root.parameters())  # a DTensor's numel() is the global one


_WRAPPER_NAMES = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod", "module")
MAX_SHAPES = 1024  # named parameters listed per model (the 1b model has 268)


def clean_name(name: str) -> str:
    """A parameter's name as a state dict names it: without the FSDP1, activation-checkpointing,
    torch.compile and DDP wrappers' segments."""
    return ".".join(part for part in name.split(".") if part and part not in _WRAPPER_NAMES)


def param_shapes(root: nn.Module) -> list[list]:
    """``[[name, [global dims]], ...]`` of the model's parameters, as a checkpoint of it must hold them: FSDP2's
    DTensors give their global shape; FSDP1's flat parameters list the names and shapes they flatten."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    out: list[list] = []
    for unit, m in root.named_modules():
        flat = getattr(m, "_flat_param", None) if isinstance(m, FullyShardedDataParallel) else None
        if flat is not None and getattr(flat, "_fqns", None) is not None:
            prefix = clean_name(unit)
            out += [[f"{prefix}.{fqn}" if prefix else clean_name(fqn), list(shape)]
                    for fqn, shape in zip(flat._fqns, flat._shapes)]
    if not out:  # FSDP2, DDP or a plain module: the parameters are the model's own
        out = [[clean_name(name), list(p.shape)] for name, p in root.named_parameters()]
    return [[clean_name(n)[:200], [int(d) for d in shape]] for n, shape in out[:MAX_SHAPES]]


def describe(root: nn.Module) -> dict:
    """The wrapping of a model as the grader needs it (before FSDP's lazy init)."""
    from torch.nn.parallel import DistributedDataParallel
    fsdp2, fsdp1 = _fsdp2_units(root), _fsdp1_units(root)
    params = list(root.parameters())
    dtype = params[0].dtype if params else torch.float32
    return {"type": "fsdp_model", "class": type(root).__name__, "fsdp2_units": fsdp2[:64],
            "fsdp1_units": fsdp1[:64], "n_units": len(fsdp2) + len(fsdp1),
            "ddp": isinstance(root, DistributedDataParallel)
            or any(isinstance(m, DistributedDataParallel) for m in root.modules()),
            "global_params": _global_numel(root, fsdp1), "element_size": torch.empty((), dtype=dtype).element_size(),
            "local_param_bytes": _unique_bytes(params, set()), "param_shapes": param_shapes(root)}


def _summary() -> dict:
    """What ``_summarise`` adds up, from nothing."""
    return {"tensors": 0, "bytes": 0, "elements": 0, "sharded": 0, "devices": set()}


def _summarise(obj, out: dict, depth: int = 0) -> None:
    if depth > 6:
        return
    if isinstance(obj, torch.Tensor):
        local = obj.to_local() if hasattr(obj, "to_local") else obj
        out["tensors"] += 1
        out["bytes"] += local.numel() * local.element_size()
        out["elements"] += local.numel()
        out["sharded"] += int(local is not obj or type(obj).__name__ == "ShardedTensor")
        out["devices"].add(local.device.type)
    elif isinstance(obj, dict):
        for v in obj.values():
            _summarise(v, out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _summarise(v, out, depth + 1)


class FsdpObserver:
    """Installs the FSDP hooks of one rank and streams what they see."""

    def __init__(self, stream, rank: int):
        self.stream, self.rank = stream, rank
        self.counter = None
        self.roots: list[nn.Module] = []
        self.forwards: list[int] = []  # per root: outermost forwards with autograd on
        self.fed: list[int] = []  # per root: forwards that took the DataLoader's latest batch
        self.backed: list[int] = []  # per root: backward passes that ran through its outputs
        self.batch: list[torch.Tensor] = []  # the tensors of the DataLoader's latest batch
        self.batch_number = 0
        self.fed_batch: list[int] = []  # per root: the batch number it last took
        self.losses: dict[int, list[float]] = {}  # per root: its own losses since the last step (``loss_of``)
        self.rows: dict[int, list[str]] = {}  # per root: digests of the input rows of its forwards since the last step
        self.out_grad: dict[int, float] = {}  # per root: |gradient| that reached its outputs since the last step
        self.grads_left: bool | None = None  # the trained root's gradients were set and not zero at the step's first backward
        self.grads_checked = -1  # the step whose first backward was checked for gradients left over
        self.optimizers: list[torch.optim.Optimizer] = []
        self.local = threading.local()  # forwards running (``_running``): a model in another thread is a root too
        self.steps = 0
        self.sum_before: float | None = None
        self.last_states: dict = {}
        self.capacity = int(os.environ.get("DISTGRADE_CAPACITY_BYTES", "0") or 0)
        self.device = int(os.environ.get("LOCAL_RANK", "0"))
        self.first_params: list = []  # (name, parameter) of the trained model at the first step
        self.first_sums: list | None = None
        self.blind = 0  # forwards and backwards seen with the memory counter switched off
        self.blind_sent = False
        self.blind_where = ""

    def install(self) -> None:
        if _ON_GPU:
            self._limit_card()
        else:
            self.counter = fsdp_memory.start()
        nn.modules.module.register_module_forward_pre_hook(self._pre_forward)
        nn.modules.module.register_module_forward_hook(self._post_forward, with_kwargs=True)
        # after _post_forward (hooks run in the order registered), and also where the forward raised
        nn.modules.module.register_module_forward_hook(self._unwind, always_call=True)
        self._hook_dataloader()
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        register_optimizer_step_pre_hook(self._pre_step)
        register_optimizer_step_post_hook(self._post_step)
        self._hook_save()
        self._hook_fsdp1_state_dict()
        previous = sys.excepthook

        def excepthook(etype, value, tb):
            if "OutOfMemoryError" in etype.__name__:
                self._on_oom(value)
            previous(etype, value, tb)
        sys.excepthook = excepthook

    def _limit_card(self) -> None:
        if not self.capacity or not torch.cuda.is_available():
            return
        total = torch.cuda.get_device_properties(self.device).total_memory
        fraction = min(1.0, self.capacity / total)
        torch.cuda.set_per_process_memory_fraction(fraction, self.device)

    # -- model ------------------------------------------------------------------
    def _hook_dataloader(self) -> None:
        """Keep the tensors of the DataLoader's latest batch: the root that takes them is the model trained."""
        from torch.utils.data import dataloader as dl
        obs, next_ = self, dl._BaseDataLoaderIter.__next__

        def __next__(it):
            data = next_(it)
            try:
                leaves = [t for t in tree_leaves(data) if isinstance(t, torch.Tensor)][:8]
            except Exception:  # an odd batch type: nothing to recognise it by
                leaves = []
            obs.batch, obs.batch_number = leaves, obs.batch_number + 1
            return data
        dl._BaseDataLoaderIter.__next__ = __next__

    def _takes_batch(self, args) -> bool:
        """Is a tensor of this forward the DataLoader's latest batch (``_batch_tensor``)?"""
        return self._batch_tensor(args) is not None

    def _batch_tensor(self, args) -> torch.Tensor | None:
        """The first tensor of this forward that is the DataLoader's latest batch: the same tensor, a view of it,
        or (moved to a card) equal to it; None where none is. A slice taken after the move is not recognised:
        then no root took the batch, and the backward decides alone."""
        if not self.batch:
            return None
        try:
            given = [t for t in tree_leaves(args) if isinstance(t, torch.Tensor)][:8]
            for t in given:
                for b in self.batch:
                    if t is b or (t.device == b.device and t.untyped_storage()._cdata == b.untyped_storage()._cdata):
                        return t
                    if t.device != b.device and t.shape == b.shape and t.dtype == b.dtype:
                        with torch.no_grad():
                            if torch.equal(t.detach().to(b.device), b):
                                return t
        except Exception:  # a tensor without storage (meta, a subclass): not the batch
            return None
        return None

    def _running(self) -> list[nn.Module]:
        """The modules whose forwards run in this thread, outermost first (parameterless ones at the top left
        out). Empty: the next forward is an outermost one."""
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
        return stack

    def _pre_forward(self, module, args):
        stack = self._running()
        self._note_blind(module)
        if not stack:
            if next(iter(module.parameters()), None) is None:
                return None  # a loss module or a wrapper holding the model elsewhere: the model it calls is the root
            index = next((i for i, m in enumerate(self.roots) if m is module), None)
            if index is None and len(self.roots) < MAX_ROOTS:
                index = len(self.roots)
                self.roots.append(module)
                self.forwards.append(0)
                self.fed.append(0)
                self.backed.append(0)
                self.fed_batch.append(0)
                try:
                    self.stream.send({**describe(module), "root": index})
                except Exception as exc:  # private FSDP internals moved: say so, keep the run going
                    self.stream.send({"type": "fsdp_model", "root": index, "error": f"{type(exc).__name__}: {exc}"[:300]})
            if index is not None and torch.is_grad_enabled():
                self.forwards[index] += 1
                if self.fed_batch[index] != self.batch_number and self._takes_batch(args):
                    self.fed_batch[index] = self.batch_number
                    self.fed[index] += 1
                self._digest_rows(index, args)
        stack.append(module)
        return None

    def _post_forward(self, module, args, kwargs, output):
        """A forward returned (not called where it raised): an outermost one's loss, rows and backward."""
        stack = self._running()
        if len(stack) != 1 or stack[0] is not module:
            return  # a nested forward, or a parameterless module at the top (its pre-hook pushed nothing)
        if torch.is_grad_enabled():
            index = next((i for i, m in enumerate(self.roots) if m is module), None)
            if index is not None:
                if kwargs and not any(isinstance(t, torch.Tensor) for t in tree_leaves(args)):
                    self._digest_rows(index, kwargs)  # model(input_ids=..., labels=...): the global pre-hook saw no tensor
                self._watch_backward(index, output)
                loss = self.loss_of(args, output)
                if loss is not None:
                    self.losses.setdefault(index, []).append(loss)

    def _unwind(self, module, args, output):
        """A forward ended, returned or raised (``always_call``): it and every forward still open inside it are
        over. A pre-hook without its post-hook (an exception the script caught, a checkpointed block whose
        recomputation in the backward PyTorch stops early by raising) left a counter raised for good, and
        every later forward of the model was taken for a nested one: no loss, no rows were read."""
        stack = self._running()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is module:
                del stack[i:]
                break
        return None

    def loss_of(self, args, output) -> float | None:
        """The loss of one forward as the model itself gave it, whatever the script does with it afterwards
        (scales it, averages it for printing): the model's own scalar output (the starter model returns the
        mean cross-entropy when handed the labels), or the cross-entropy of its logits against the labels of
        the DataLoader's latest batch (the batch tensor of the logits' shape that was not the model's input).
        None where neither can be read: the check counts that against the run."""
        try:
            with torch.no_grad():
                if not isinstance(output, torch.Tensor) or not output.is_floating_point():
                    return None
                if output.dim() == 0:
                    value = float(output.detach())
                    return value if value == value else None
                if output.dim() < 2:
                    return None
                given = [t for t in tree_leaves(args) if isinstance(t, torch.Tensor)][:8]
                for labels in self.batch:
                    if labels.dtype != torch.long or tuple(labels.shape) != tuple(output.shape[:-1]):
                        continue
                    if any(t.shape == labels.shape and torch.equal(t.detach().cpu(), labels.cpu()) for t in given):
                        continue  # the input ids, not the labels
                    value = float(torch.nn.functional.cross_entropy(
                        output.detach().flatten(0, -2).float(), labels.to(output.device).flatten()))
                    return value if value == value else None
        except Exception:  # an OOM on a full card, an odd tensor: no reading for this forward
            return None
        return None

    def _digest_rows(self, index: int, args) -> None:
        """A short digest of each row (sample) of the DataLoader's batch among the tensors this root's forward took,
        else of its first tensor (a script that indexes its data itself): what two ranks, or two steps of one rank,
        fed the model is compared by content, whatever the DataLoader's indices said. Not simply the first tensor:
        a wrapper's leading per-rank or per-step tag would be digested in the batch's place."""
        rows = self.rows.setdefault(index, [])
        if len(rows) >= MAX_ROWS:
            return
        try:
            x = self._batch_tensor(args)
            if x is None:
                x = next((t for t in tree_leaves(args) if isinstance(t, torch.Tensor)), None)
            if x is None or x.numel() == 0 or x.is_meta:
                return
            with torch.no_grad():
                x = x.detach()
                x = (x.to_local() if hasattr(x, "to_local") else x).to("cpu").contiguous()
                x = x.reshape(x.shape[0], -1) if x.dim() >= 2 else x.reshape(1, -1)
                for row in x[:MAX_ROWS - len(rows)]:
                    data = row.numpy().tobytes() if row.dtype != torch.bfloat16 else row.view(torch.int16).numpy().tobytes()
                    rows.append(_blake2b(data, digest_size=6).hexdigest())
        except Exception:  # an odd tensor (a subclass without storage): no digest for this forward
            return

    def _check_grads_left(self, index: int) -> None:
        """At the first backward after an optimizer step: are the trained root's gradients still set and not
        zero? Then this step's gradients are added to the last one's (``zero_grad()`` forgotten)."""
        if self.steps < 1 or self.grads_checked == self.steps or index != self.trained_root():
            return
        self.grads_checked = self.steps
        try:
            with torch.no_grad():  # any(): a reduction, no copy the size of the gradient
                grads = (p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                         for p in self.roots[index].parameters() if p.grad is not None)
                self.grads_left = any(g.numel() and bool(g.detach().any()) for g in grads)
        except Exception:  # an OOM on a full card: no reading for this step
            self.grads_left = None

    def _watch_backward(self, index: int, output) -> None:
        """Count a backward through this root's outputs (once per output tensor that carries a gradient)."""
        try:
            outs = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.requires_grad][:4]
        except Exception:
            return
        obs = self

        def seen(grad):
            obs.backed[index] += 1
            obs._note_blind(None, forward=False)
            obs._check_grads_left(index)
            try:  # how much gradient this rank's backward sent into the model: zero where its loss was scaled by 0
                with torch.no_grad():
                    g = grad.to_local() if hasattr(grad, "to_local") else grad
                    # a reduction, not abs() of the logits' gradient: the counter would take that copy for the student's
                    obs.out_grad[index] = obs.out_grad.get(index, 0.0) + float(torch.linalg.vector_norm(g.detach(), ord=1))
            except Exception:  # an odd gradient (a subclass, an OOM): no reading for this backward
                pass
            return None
        for t in outs:
            try:
                t.register_hook(seen)
            except RuntimeError:  # a leaf that does not take hooks: nothing to watch
                pass

    def _note_blind(self, module, forward: bool = True) -> None:
        """On a CPU host, work done where the memory counter is switched off (the script popped the dispatch
        modes): the counted peak misses it, so the memory evidence cannot be read. Reported once, with where."""
        if self.counter is None or self.blind_sent or (forward and not torch.is_grad_enabled()):
            return
        if fsdp_memory.counting_here():
            return
        self.blind += 1
        if self.blind == 1:
            self.blind_where = type(module).__name__ if module is not None else "backward"
        if self.blind >= 2:  # one event could be the harness's own; two are the script's
            self.blind_sent = True
            self.stream.send({"type": "fsdp_blind", "step": self.steps, "where": self.blind_where[:80]})

    def trained_roots(self) -> list[int]:
        """The roots that trained: took a DataLoader batch and had a backward through their outputs;
        where none did, those with a backward at all."""
        backed = [i for i in range(len(self.roots)) if self.backed[i] > 0]
        fed = [i for i in backed if self.fed[i] > 0]
        return fed or backed

    def trained_root(self) -> int | None:
        """The root that trained (``trained_roots``: most batches taken, then the most parameters), or None."""
        if not self.roots:
            return None
        pool = self.trained_roots() or list(range(len(self.roots)))
        return max(pool, key=lambda i: (self.fed[i], sum(p.numel() for p in self.roots[i].parameters()),
                                        self.backed[i], self.forwards[i]))

    # -- steps ------------------------------------------------------------------
    def _model_params(self) -> list[torch.Tensor]:
        # The model is the root that trained: a loss module, a helper called outside the model's
        # forward, or a decoy run once is a root too.
        index = self.trained_root()
        return [] if index is None else list(self.roots[index].parameters())

    def _param_sum(self) -> float | None:
        """Sum of |parameters| in float64, or None when the card has no room left to compute it.

        Seen on an H200 after a 1b run's CUDA OOM: ``.double()`` of one parameter asked for
        500 MiB more and the harness's own traceback landed in the student's log. ``abs().sum``
        with a float64 accumulator needs half that, and an OOM here only means "no sum".
        """
        try:
            with torch.no_grad():
                return float(sum((p.detach().to_local() if hasattr(p, "to_local") else p.detach())
                                 .abs().sum(dtype=torch.float64) for p in self._model_params()))
        except torch.OutOfMemoryError:
            return None

    def _pre_step(self, optimizer, args, kwargs) -> None:
        if not any(o is optimizer for o in self.optimizers):
            self.optimizers.append(optimizer)
            model_ids = {id(p) for p in self._model_params()}
            opt_params = [p for g in optimizer.param_groups for p in g["params"]]
            self.stream.send({"type": "fsdp_optimizer", "params": len(opt_params),
                              "in_model": sum(id(p) in model_ids for p in opt_params),
                              "with_grad": sum(p.grad is not None for p in opt_params),
                              "model_params": len(model_ids)})
        if self.sum_before is None and self.roots:
            self.sum_before = self._param_sum()
            index = self.trained_root()
            if index is not None:
                self.first_params = list(self.roots[index].named_parameters())
                self.first_sums = self._each_sum([p for _, p in self.first_params])

    def states(self) -> dict:
        """Local bytes of parameters, gradients and optimizer states now."""
        seen: set[int] = set()
        params = self._model_params()
        p_bytes = _unique_bytes(params, seen)
        g_bytes = _unique_bytes([p.grad for p in params], seen)
        opt_tensors = [v for o in self.optimizers for s in o.state.values() for v in s.values()]
        o_bytes = _unique_bytes(opt_tensors, seen)
        # the part of them the peak counts: on the card on a GPU host (a CPU-offloaded state is not), all on a CPU one
        where, seen = ("cuda" if _ON_GPU else "cpu"), set()
        measured = sum(_unique_bytes(ts, seen, where) for ts in (params, [p.grad for p in params], opt_tensors))
        return {"params": p_bytes, "grads": g_bytes, "optimizer": o_bytes, "measured": measured}

    def _post_step(self, optimizer, args, kwargs) -> None:
        if optimizer is not self.optimizers[0]:
            return
        self.steps += 1
        states = self.states()
        if _ON_GPU and torch.cuda.is_available():
            peak = torch.cuda.max_memory_allocated(self.device)
            live = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            peak, live = self.counter.reset_peak(), self.counter.live
        root = self.trained_root()
        losses = self.losses.get(root, []) if root is not None else []
        rows, out_grad = self.rows.get(root, []), self.out_grad.get(root)
        grads_left = self.grads_left if self.grads_checked == self.steps - 1 else None
        self.losses, self.rows, self.out_grad, self.grads_left = {}, {}, {}, None
        self.last_states = {**states, "peak": peak, "live": live, "step": self.steps, "root": root,
                            "trained": self.trained_roots()[:MAX_ROOTS],
                            "model_loss": sum(losses) / len(losses) if losses else None, "model_forwards": len(losses),
                            "rows": rows[:MAX_ROWS], "out_grad": out_grad, "grads_left": grads_left}
        self.stream.send({"type": "fsdp_mem", **self.last_states})

    # -- checkpoints --------------------------------------------------------------
    def _hook_fsdp1_state_dict(self) -> None:
        """What an FSDP1 ``model.state_dict()`` gathered on this rank (``fsdp_gathered``): a full state
        dict gathered with ``rank0_only=False`` costs every rank a full copy, though only rank 0 saves it."""
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        except ImportError:
            return
        obs, state_dict = self, FSDP.state_dict

        def hooked(module, *args, **kwargs):
            out = state_dict(module, *args, **kwargs)
            if not args and not kwargs.get("prefix") and kwargs.get("destination") is None:  # the outermost call
                summary = _summary()
                try:
                    _summarise(out, summary)
                except Exception:  # an odd state dict: nothing to report
                    return out
                obs.stream.send({"type": "fsdp_gathered", "step": obs.steps, "tensors": summary["tensors"],
                                 "bytes": summary["bytes"], "sharded": summary["sharded"]})
            return out
        FSDP.state_dict = hooked

    def _hook_save(self) -> None:
        obs, save = self, torch.save

        def hooked_save(obj, f, *args, **kwargs):
            out = _summary()
            _summarise(obj, out)
            try:  # where it went: the grader matches a rank's sharded save to the file it left
                named = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
                path = os.path.abspath(named)[:300] if isinstance(named, str) else None
            except (TypeError, ValueError):
                path = None
            obs.stream.send({"type": "fsdp_save", "step": obs.steps, **out, "devices": sorted(out["devices"]),
                             "path": path})
            return save(obj, f, *args, **kwargs)
        torch.save = hooked_save
        try:
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint import state_dict as sd
        except ImportError:
            return
        for name in ("save", "async_save", "save_state_dict"):
            if hasattr(dcp, name):
                setattr(dcp, name, self._wrap(getattr(dcp, name), {"type": "fsdp_dcp", "call": name}))
        for name in ("get_model_state_dict", "get_state_dict"):
            setattr(sd, name, self._wrap_options(getattr(sd, name), name))

    def _wrap(self, fn, record):
        def wrapped(*args, **kwargs):
            self.stream.send({**record, "step": self.steps})
            return fn(*args, **kwargs)
        return wrapped

    def _wrap_options(self, fn, name):
        def wrapped(*args, **kwargs):
            opts = kwargs.get("options")
            self.stream.send({"type": "fsdp_state_dict", "call": name, "step": self.steps,
                              "full_state_dict": bool(getattr(opts, "full_state_dict", False)),
                              "cpu_offload": bool(getattr(opts, "cpu_offload", False))})
            return fn(*args, **kwargs)
        return wrapped

    @staticmethod
    def _each_sum(params) -> list[float] | None:
        """Each parameter's local |sum| in float64 (None for an empty shard), or None without room to compute it."""
        try:
            with torch.no_grad():
                sums = []
                for p in params:
                    local = p.detach().to_local() if hasattr(p, "to_local") else p.detach()
                    sums.append(local.abs().sum(dtype=torch.float64) if local.numel() else None)
                return [None if x is None else float(x) for x in sums]
        except torch.OutOfMemoryError:
            return None

    def _stale(self) -> dict:
        """The trained model's parameters that never changed from the first step to the end and that no
        optimizer holds: what an optimizer built before ``fully_shard`` replaced them leaves untrained."""
        if not self.first_params or self.first_sums is None:
            return {}
        after = self._each_sum([p for _, p in self.first_params])
        if after is None:
            return {}
        held = {id(p) for o in self.optimizers for g in o.param_groups for p in g["params"]}
        stale = [name for (name, p), a, b in zip(self.first_params, self.first_sums, after)
                 if a is not None and a == b and id(p) not in held]
        return {"stale": len(stale), "stale_names": [n[:80] for n in stale[:8]], "checked": len(self.first_params)}

    # -- the end ----------------------------------------------------------------
    def _on_oom(self, exc) -> None:
        rec = {"type": "fsdp_oom", "step": self.steps, "message": str(exc)[:600], "capacity": self.capacity}
        try:
            rec.update(states=self.states(), allocated=torch.cuda.memory_allocated(self.device),
                       peak=torch.cuda.max_memory_allocated(self.device))
        except Exception as err:  # the card may be unusable after the error
            rec["error"] = f"{type(err).__name__}"
        self.stream.send(rec)

    def at_exit(self) -> None:
        """Send the parameter sums that tell whether training changed the model."""
        if os.getpid() != self.stream.pid:
            return
        after = self._param_sum() if self.roots else None
        index = self.trained_root()
        placed = order.model_order(self.roots[index]) if index is not None else None
        self.stream.send({"type": "fsdp_end", "steps": self.steps, "sum_before": self.sum_before,
                          "sum_after": after, **(placed or {"order": None, "squares": None}), **self._stale()})


def install(stream, rank: int):
    """Install the FSDP observer; returns it (its ``at_exit`` must run before the end marker)."""
    observer = FsdpObserver(stream, rank)
    observer.install()
    return observer
