"""In-process traces the grader cross-checks with what it gathers outside (``graders/evidence``).

* ``params``: a digest of the trained parameters (those of the modules that took the training
  batches, ``trained``; else every optimizer's), at every step, so ranks are compared *during*
  training and whatever module DDP wraps; which steps are compared is drawn by the grader after
  the run (a schedule known in advance could be synchronised on those steps alone);
* ``writes``: the paths this rank opened for writing. An audit hook sees ``open``/``os.open``
  (student code cannot remove an audit hook) and torch's own zip writer, which opens its
  file in C++ and so raises no ``open`` event;
* ``model``: rank 0's trained module at exit (the module that took the training batches, with its buffers, else
  the parameters in optimizer order), written for the grader's own evaluation in a process of its own.

All of this runs inside the student's process: the grader trusts none of it alone. Writes are
confirmed by the files still in the job folder, the model by its score on held-out data.
"""
from __future__ import annotations

import hashlib
import os
import sys
import weakref

import torch

MAX_DIGESTS = 48  # params records per rank
MAX_WRITES = 64  # distinct paths reported per rank
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_SKIP_PREFIXES = ("/dev/", "/proc/", "/sys/")
_save = torch.save  # the original, before any student code


def digest_step(count: int) -> bool:
    """Steps whose full ``params`` record is sent (1, 2, 4, 8, ... and every 100th): readable sums for a
    message and the parameter count. Which steps are *compared* is not this: every step's short digest is
    sent, and the grader compares the steps it draws from the job's secret."""
    return count & (count - 1) == 0 or count % 100 == 0


def stepped_params(optimizers) -> list[torch.Tensor]:
    """Every parameter of every param group of every optimizer, in order, each once."""
    seen, out = set(), []
    for o in optimizers:
        for g in o.param_groups:
            for p in g["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
    return out


def _sharded(p) -> bool:
    """FSDP2 DTensors and FSDP1 flat parameters: each rank holds a shard."""
    return type(p).__name__ in ("DTensor", "FlatParameter") or hasattr(p, "_local_tensor") or hasattr(p, "_is_flat_param")


def param_rows(params) -> torch.Tensor:
    """Each tensor's float64 sum and absolute sum, flat, on the CPU (computed on the tensor's device: no
    copy of the model). Ranks whose parameters are identical produce identical bytes."""
    with torch.no_grad():
        rows = []
        for p in params:
            t = p.detach()
            t = t.to_local() if hasattr(t, "to_local") else t
            t = t.double()
            rows.append(torch.stack([t.sum(), t.abs().sum()]) if t.numel() else torch.zeros(2, dtype=torch.float64,
                                                                                            device=t.device))
        return torch.cat(rows).cpu() if rows else torch.zeros(0, dtype=torch.float64)


def short_digest(rows: torch.Tensor) -> str:
    """The first 16 hex digits of ``rows``' sha256: one step's parameters, compared across ranks."""
    return hashlib.sha256(rows.numpy().tobytes()).hexdigest()[:16]


def params_record(params, step: int, rows: torch.Tensor, source: str) -> dict:
    """The ``params`` record of ``param_rows(params)``: the full digest, the parameter count (the traffic a
    correct run moves is judged from it) and the first sums for a readable difference."""
    sums = rows.tolist()
    return {"type": "params", "step": step, "digest": hashlib.sha256(rows.numpy().tobytes()).hexdigest(),
            "tensors": len(params), "elements": int(sum(p.numel() for p in params if p.requires_grad)),  # frozen: no traffic
            "sharded": any(_sharded(p) for p in params), "sums": [x for x in sums[0::2][:16]], "source": source}


class Writes:
    """Paths opened for writing by this process, from an audit hook (never removed)."""

    def __init__(self, channel_dir: str):
        self.paths: dict[str, int] = {}
        self.more = 0
        self.skip = (os.path.realpath(channel_dir) + os.sep,)
        self.on = True

    def install(self) -> None:
        sys.addaudithook(self._hook)
        writer = torch.serialization._open_zipfile_writer_file
        init, obs = writer.__init__, self

        def __init__(zf, name, *args, **kwargs):  # torch.save to a path opens it in C++: no audit event
            obs.note(name)
            return init(zf, name, *args, **kwargs)
        writer.__init__ = __init__
        self._c_writers()

    def _c_writers(self) -> None:
        """torch's other writers that open their file in C++ (TorchScript, the zip writer itself, a shared
        file-backed storage). A writer missed here still leaves its file: the grader judges a checkpoint
        no rank reported (``graders.evidence.files``)."""
        obs = self

        def noting(original, shared_only=False):
            def wrapper(*args, **kwargs):
                target = args[1] if len(args) > 1 and not shared_only else (args[0] if args else None)
                if shared_only:
                    shared = kwargs.get("shared", args[1] if len(args) > 1 else False)
                    target = args[0] if shared else None
                if isinstance(target, (str, bytes, os.PathLike)):
                    obs.note(target)
                return original(*args, **kwargs)
            return wrapper
        for owner, name in ((torch._C.ScriptModule, "save"), (torch._C.ScriptModule, "_save_for_mobile"),
                            (torch._C.PyTorchFileWriter, "__init__")):
            original = getattr(owner, name, None)
            if original is not None:
                setattr(owner, name, noting(original))
        original = getattr(torch, "from_file", None)
        if original is not None:
            torch.from_file = noting(original, shared_only=True)

    def _hook(self, event: str, args) -> None:
        if event in ("os.rename", "os.link") and self.on:  # os.replace too: a file moved into place (atomic save)
            try:
                if args[3] in (None, -1):  # dst_dir_fd: a path relative to a folder fd cannot be resolved here
                    self.note(args[1])
            except Exception:  # an audit hook must never raise into the student's call
                pass
            return
        if event == "sqlite3.connect" and self.on:  # sqlite opens its database in C: no "open" event
            try:
                if args and args[0] not in ("", ":memory:", b"", b":memory:"):
                    self.note(args[0])
            except Exception:  # an audit hook must never raise into the student's call
                pass
            return
        if event != "open" or not self.on:
            return
        try:
            path, mode, flags = args
            if isinstance(mode, str):
                writing = any(c in mode for c in "wax+")
            else:
                writing = isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
            if writing:
                self.note(path)
        except Exception:  # an audit hook must never raise into the student's open()
            pass

    def note(self, path) -> None:
        if isinstance(path, int):
            return  # an fd: already open
        try:
            p = os.path.abspath(os.fsdecode(path))
        except Exception:
            return
        if p.startswith(_SKIP_PREFIXES) or p.startswith(self.skip):
            return
        if p in self.paths:
            self.paths[p] += 1
        elif len(self.paths) < MAX_WRITES:
            self.paths[p] = 1
        else:
            self.more += 1

    def record(self) -> dict:
        return {"type": "writes", "paths": [[p[-300:], n] for p, n in self.paths.items()], "more": self.more}


class Modules:
    """Every ``nn.Module`` built after installation (weakly held), to find the one that owns the
    stepped parameters at exit. Construction is patched rather than forward: a global forward hook
    breaks ``torch.compile`` ("already tracked for mutation"), construction happens outside it."""

    def __init__(self):
        self.seen: "weakref.WeakSet" = weakref.WeakSet()

    def install(self) -> None:
        init, seen = torch.nn.Module.__init__, self.seen

        def __init__(module, *args, **kwargs):
            init(module, *args, **kwargs)
            try:
                seen.add(module)
            except TypeError:
                pass
        torch.nn.Module.__init__ = __init__

    def owner(self, params):
        """The module holding the most of ``params`` (the model; a wrapper of it is as good), or None."""
        stepped = {id(p) for p in params}
        best, best_n = None, 0
        for m in list(self.seen):
            try:
                n = sum(1 for p in m.parameters() if id(p) in stepped)
            except Exception:
                continue
            if n > best_n or (n == best_n and n and type(m).__name__ == "DistributedDataParallel"):
                best, best_n = m, n
        return best


def save_model(path: str, params, owner) -> dict:
    """Write rank 0's model for the grader: the owner's state dict (parameters and buffers) with
    its names, else ``params`` by position. Returns the ``model`` record."""
    if any(_sharded(p) for p in params) or (owner is not None and any(
            "FullyShardedDataParallel" in type(m).__name__ for m in owner.modules())):
        # FSDP: a state dict is a collective every rank must join; rank 0 alone at exit would hang
        return {"type": "model", "saved": False, "source": "sharded"}
    with torch.no_grad():
        if owner is not None:
            state = {k: v.detach().to("cpu").clone() for k, v in owner.state_dict().items()
                     if isinstance(v, torch.Tensor) and not hasattr(v, "to_local")}
            source = "module"
        else:
            state = {f"param.{i}": p.detach().to("cpu").clone()
                     for i, p in enumerate(params) if not hasattr(p, "to_local")}
            source = "optimizer"
    if not state:
        return {"type": "model", "saved": False, "source": "none"}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        _save(state, f)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return {"type": "model", "saved": True, "source": source, "sha256": sha, "tensors": len(state)}
