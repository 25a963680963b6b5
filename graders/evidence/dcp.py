"""What a distributed checkpoint (``torch.distributed.checkpoint``) left in the work folder holds, read by the
grader from its ``.metadata`` file: every entry's key, and for a tensor its global shape and how much of it the
chunks the saving ranks wrote cover (``partial``: a dcp.save only rank 0 called lists every global shape, and
only rank 0's shards).

``dcp.save`` writes ``.metadata`` as a pickle of ``Metadata`` (``state_dict_metadata``: key ->
``TensorStorageMetadata(properties, size, chunks)`` or ``BytesStorageMetadata``). The file is the student's: a
pickle can name any callable, so it is never unpickled with the real classes. ``_StubUnpickler`` turns every
global into an inert stand-in that only records its name, its arguments and its state; nothing of the
student's choosing runs in the grader. The file is bounded in size and the entries read in count.
"""
from __future__ import annotations

import io
import itertools
import math
import os
import pickle
import pickletools
import stat
from pathlib import Path
from typing import Any

from coursework.report import text
from graders.evidence import SOURCE_OUTSIDE

MAX_METADATA_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 4096  # keys read per checkpoint (the 1b model with AdamW states has about 800)
MAX_CHECKPOINTS = 8
MAX_CHUNKS = 4096  # chunks read per tensor (one per rank that holds part of it)
MAX_GLOBALS = 64  # distinct classes a .metadata may name (a real one names about 10)
# Pickle opcodes read before anything is built. A real .metadata has about 0.47 per byte: 171,363 for a single
# process's 1,600 keys (366 KB), about 150,000 for homework 3's 1b model with AdamW on 2 ranks. An 8 MiB file of
# one-byte container opcodes would build 8 million objects (about 0.5 GB) in the grader; at this bound it is
# about 1 million (about 60 MB), and only while the file is read.
MAX_PICKLE_OPS = 1_000_000


class _Stub:
    """An inert stand-in for whatever class or function the pickle names."""

    qualname = "?"

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.args, obj.state = args, None
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.state = state


class _StubUnpickler(pickle.Unpickler):
    """One stand-in class per name, and at most ``MAX_GLOBALS`` names: the file does not decide how much the
    grader grows."""

    def __init__(self, file) -> None:
        super().__init__(file)
        self.stubs: dict[str, type] = {}

    def find_class(self, module: str, name: str):  # noqa: D102 (pickle's hook)
        qualname = f"{str(module)[:80]}.{str(name)[:80]}"
        stub = self.stubs.get(qualname)
        if stub is None:
            if len(self.stubs) >= MAX_GLOBALS:
                raise pickle.UnpicklingError("too many globals")
            stub = self.stubs[qualname] = type("Stub", (_Stub,), dict(qualname=qualname))
        return stub


def _field(obj: Any, name: str) -> Any:
    state = getattr(obj, "state", None)
    if isinstance(state, tuple) and len(state) == 2:  # (dict, slots) of a class with __slots__
        state = state[0] or state[1]
    return state.get(name) if isinstance(state, dict) else None


def _shape(size: Any) -> list[int] | None:
    """A ``torch.Size`` stand-in's dimensions (``torch.Size((3, 4))`` pickles as a call with one tuple)."""
    args = getattr(size, "args", None)
    dims = args[0] if isinstance(args, tuple) and len(args) == 1 else None
    if isinstance(dims, (tuple, list)) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        return [int(d) for d in dims][:16]
    return None


def read_metadata(path: Path) -> dict[str, Any]:
    """``{"tensors": {key: [dims]}, "other": n}`` (``other``: entries that are no tensor: bytes, a step counter),
    or ``{"error": why}``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return {"error": f"unreadable: {type(exc).__name__}"}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_METADATA_BYTES:
            return {"error": "not a regular file of a readable size"}
        data = b""
        while len(data) < st.st_size:
            chunk = os.read(fd, st.st_size - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        if sum(1 for _ in itertools.islice(pickletools.genops(io.BytesIO(data)), MAX_PICKLE_OPS + 1)) > MAX_PICKLE_OPS:
            return {"error": "unreadable: too many pickle operations"}
        meta = _StubUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # a broken or hostile pickle: unreadable, and that counts against the run
        return {"error": f"unreadable: {type(exc).__name__}"}
    entries = _field(meta, "state_dict_metadata")
    if not isinstance(entries, dict):
        return {"error": "no state_dict_metadata"}
    tensors: dict[str, list[int]] = {}
    partial: dict[str, list[int]] = {}
    other = 0
    for key, value in list(entries.items())[:MAX_ENTRIES]:
        shape = _shape(_field(value, "size")) if isinstance(value, _Stub) else None
        if isinstance(key, str) and shape is not None:
            tensors[key[:300]] = shape
            covered, whole = _covered(_field(value, "chunks")), math.prod(shape)
            if covered < whole:
                partial[key[:300]] = [covered, whole]
        else:
            other += 1
    return {"tensors": tensors, "other": other, **({"partial": partial} if partial else {})}


def _covered(chunks: Any) -> int:
    """Elements the chunks a ``.metadata`` lists for one tensor hold (each chunk's sizes multiplied): what the
    ranks that saved wrote of it. A chunk that cannot be read holds nothing; beyond ``MAX_CHUNKS`` none count."""
    if not isinstance(chunks, list) or len(chunks) > MAX_CHUNKS:
        return 0
    total = 0
    for chunk in chunks:
        sizes = _shape(_field(chunk, "sizes")) if isinstance(chunk, _Stub) else None
        total += math.prod(sizes) if sizes is not None else 0
    return total


def checkpoints(left: dict[str, int], work: Path) -> dict[str, Any]:
    """Every ``.metadata`` the run left (``left``: ``graders.evidence.files.scan``), read: ``{"source",
    "checkpoints": {relative path of the .metadata: read_metadata(...)}}``."""
    found = sorted(p for p in left if os.path.basename(p) == ".metadata")[:MAX_CHECKPOINTS]
    return {"source": SOURCE_OUTSIDE,
            "what": text("分布式检查点 .metadata 中的键和张量形状（评分程序读取）",
                         "the keys and tensor shapes in each distributed checkpoint's .metadata, read by the grader"),
            "checkpoints": {os.path.relpath(p, work)[:200]: read_metadata(Path(p)) for p in found}}


def partial(meta: dict[str, Any], shapes: list[list]) -> list[str]:
    """Which of the model's parameters the checkpoint lists only in part: the chunks of every key that is the name
    or ends with ``.name`` cover less than the tensor (only some ranks wrote their shards)."""
    parts = meta.get("partial") if isinstance(meta, dict) else None
    parts = parts if isinstance(parts, dict) else {}
    tensors = meta.get("tensors") if isinstance(meta, dict) else None
    tensors = tensors if isinstance(tensors, dict) else {}
    torn = {tail for key in parts for tail in _tails(key)}
    whole = {tail for key in tensors if key not in parts for tail in _tails(key)}
    return [name for name, _ in shapes if name in torn and name not in whole]


def _tails(key: Any) -> list[str]:
    """A dotted key and every ending of it: ``model.tok.weight``, ``tok.weight``, ``weight``."""
    pieces = str(key).split(".")
    return [".".join(pieces[i:]) for i in range(len(pieces))]


def holds(meta: dict[str, Any], shapes: list[list]) -> tuple[list[str], int]:
    """Which of the model's parameters (``[[name, dims], ...]``) the checkpoint lacks: no key that is the name
    or ends with ``.name`` (a nested ``{"model": ...}`` state dict) with the same global shape. Returns the
    missing names and how many were looked for."""
    tensors = meta.get("tensors") if isinstance(meta, dict) else None
    tensors = tensors if isinstance(tensors, dict) else {}
    by_tail: dict[str, list[list[int]]] = {}
    for key, dims in tensors.items():
        for tail in _tails(key):
            by_tail.setdefault(tail, []).append(dims)
    missing = [name for name, dims in shapes if list(dims) not in by_tail.get(name, [])]
    return missing, len(shapes)
