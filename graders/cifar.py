"""A small synthetic CIFAR-10 in the exact on-disk layout of the real one.

Students' scripts read ``cifar-10-batches-py/`` with ``pickle.load(f, encoding="bytes")``,
``encoding="latin1"`` or through torchvision. The real files were pickled by Python 2,
so their keys and the array bytes are py2 ``str`` (opcode ``BINSTRING``): Python 3 turns
them into ``bytes`` or ``str`` depending on ``encoding``. Python 3's own pickler writes
``bytes`` differently, so ``_Py2Pickler`` emits the py2 opcodes itself.

Images are learnable (each class has its own colour pattern plus noise) and fully
determined by the seed, so every host builds byte-identical files. Every image also carries a
mark of its own, faint waves along its rows and columns (``distgrade_harness.marks``), so the
harness can tell which samples reached the model however the script loaded them. Training images
are marked 0..N-1 in file order (torchvision's numbering), test images from the top of the range
down. The class patterns are cleared of those frequencies so that they carry no such waves themselves.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import pickle
import struct
from pathlib import Path

import numpy as np


def _load_marks():
    """The harness's ``marks`` module, loaded alone (the harness package itself is for the job's processes)."""
    path = Path(__file__).resolve().parent / "harness" / "distgrade_harness" / "marks.py"
    spec = importlib.util.spec_from_file_location("distgrade_marks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


marks = _load_marks()

CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
           "dog", "frog", "horse", "ship", "truck"]
FOLDER = "cifar-10-batches-py"
NOISE = 16.0  # per pixel: with the marks, a small model learns the classes in 40 steps (measured over seeds)
STAMP = "distgrade-synthetic.json"  # marks a synthetic set (torchvision's md5 check is patched for it)


class _Py2Pickler(pickle._Pickler):  # the pure-Python pickler lets us replace one opcode writer
    """Protocol-2 pickler that writes ``bytes`` as Python 2 ``str`` (BINSTRING)."""

    def save_bytes(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[bytes] = save_bytes

    def save_global(self, obj, name=None):
        # numpy 2 reduces arrays to numpy._core...; the real files (and numpy 1) use numpy.core.
        module = getattr(obj, "__module__", "")
        if module.startswith("numpy._core"):
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n" + obj.__name__.encode() + b"\n")
            self.memoize(obj)
            return
        super().save_global(obj, name)


for _kind, _writer in list(_Py2Pickler.dispatch.items()):
    if _writer is pickle._Pickler.save_global:
        _Py2Pickler.dispatch[_kind] = _Py2Pickler.save_global


def _dumps_py2(obj) -> bytes:
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def _cleared(patterns: np.ndarray) -> np.ndarray:
    """Class patterns whose row and column means hold none of the marks' frequencies (the rest of
    their shape stays: it is what a small model learns first)."""
    p = patterns.reshape(-1, 3, marks.SIZE, marks.SIZE).copy()
    y = np.arange(marks.SIZE)
    waves = np.stack([f(2 * np.pi * k * y / marks.SIZE) for k in marks.FREQS for f in (np.cos, np.sin)], 1)
    onto = waves @ np.linalg.pinv(waves)  # projection onto the marks' frequencies
    p -= (p.mean(3) @ onto.T)[..., None]
    p -= (p.mean(2) @ onto.T)[..., None, :]
    return p.reshape(len(patterns), -1)


def class_patterns(rng: np.random.Generator) -> np.ndarray:
    """The ten class patterns, the first draw from a set's seed (``graders.evidence.model`` draws them again)."""
    return _cleared(rng.uniform(30, 225, size=(10, 3072)))


def _marked(rng: np.random.Generator, ids) -> np.ndarray:
    """The marks of the samples numbered ``ids``, one channel each (len(ids) x 1024), at random phases."""
    ids = np.asarray(ids, dtype=np.int64)
    combos = np.array(marks.COMBOS)  # (70, 4) frequencies
    rows, cols = combos[ids // len(marks.COMBOS)], combos[ids % len(marks.COMBOS)]  # (n, 4) each
    y = np.arange(marks.SIZE)
    phases = rng.uniform(0, 2 * np.pi, size=(len(ids), 2, marks.PER_AXIS))

    def waves(freqs, phase):  # (n, SIZE): the sum of an axis' four waves
        return np.cos(2 * np.pi * freqs[:, :, None] * y / marks.SIZE + phase[:, :, None]).sum(1)
    out = marks.AMPLITUDE * (waves(rows, phases[:, 0])[:, :, None] + waves(cols, phases[:, 1])[:, None, :])
    return out.reshape(len(ids), -1)


def images(rng: np.random.Generator, labels: np.ndarray, patterns: np.ndarray, ids) -> np.ndarray:
    """Images of the classes ``labels`` marked as the samples ``ids``, with fresh noise from ``rng``."""
    marked = _marked(rng, ids)[:, None, :]  # the same on every channel
    noise = rng.normal(0.0, NOISE, size=(len(labels), 3072))
    image = (patterns[labels] + noise).reshape(len(labels), 3, -1) + marked
    return np.clip(image, 0, 255).astype(np.uint8).reshape(len(labels), -1)


def _batch(name: str, data: np.ndarray, labels: np.ndarray, start: int) -> bytes:
    return _dumps_py2({
        b"batch_label": name.encode(),
        b"labels": [int(x) for x in labels],
        b"data": data,
        b"filenames": [f"synthetic_{start + i:06d}.png".encode() for i in range(len(labels))],
    })


def write_synthetic(root: str | os.PathLike[str], *, per_batch: int = 512, test_size: int = 512,
                    seed: int = 0) -> Path:
    """Write a synthetic CIFAR-10 under ``root/cifar-10-batches-py`` and return that folder.

    Five training batches of ``per_batch`` images and one test batch; idempotent (an
    existing set with the same parameters is reused).
    """
    folder = Path(root) / FOLDER
    # the stamp names the set by a digest: a job's seed is secret, and the folder is the student's to read
    drawn = json.dumps({"per_batch": per_batch, "test_size": test_size, "seed": seed}, sort_keys=True)
    params = {"per_batch": per_batch, "test_size": test_size, "version": 3,
              "digest": hashlib.sha256(drawn.encode()).hexdigest()}
    stamp = folder / STAMP
    if stamp.is_file() and json.loads(stamp.read_text()) == params:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    if 5 * per_batch + test_size > marks.CAPACITY:
        raise ValueError(f"a synthetic set holds at most {marks.CAPACITY} marked images")
    rng = np.random.default_rng(seed)
    patterns = class_patterns(rng)
    for i in range(1, 6):
        labels = rng.integers(0, 10, size=per_batch)
        data = images(rng, labels, patterns, range((i - 1) * per_batch, i * per_batch))
        _write(folder / f"data_batch_{i}",
               _batch(f"training batch {i} of 5", data, labels, (i - 1) * per_batch))
    labels = rng.integers(0, 10, size=test_size)
    test = images(rng, labels, patterns, range(marks.CAPACITY - 1, marks.CAPACITY - 1 - test_size, -1))
    _write(folder / "test_batch", _batch("testing batch 1 of 1", test, labels, 0))
    _write(folder / "batches.meta", _dumps_py2({
        b"num_cases_per_batch": per_batch,
        b"label_names": [c.encode() for c in CLASSES],
        b"num_vis": 3072,
    }))
    stamp.write_text(json.dumps(params))
    for p in [folder, *folder.iterdir()]:  # the sandboxed ranks run as another uid
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(folder.parent, 0o755)
    return folder


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def train_size(root: str | os.PathLike[str]) -> int:
    """Number of training images in the set under ``root`` (synthetic or real)."""
    folder = Path(root) / FOLDER
    total = 0
    for i in range(1, 6):
        with open(folder / f"data_batch_{i}", "rb") as f:
            total += len(pickle.load(f, encoding="bytes")[b"labels"])
    return total
