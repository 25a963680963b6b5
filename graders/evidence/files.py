"""The files a run left in its work folder, and which rank opened each for writing.

The folder is listed after the run by the grader (outside: the script cannot hide a file it
left there). Which rank wrote a file comes from the ``writes`` record of that rank's harness
(an audit hook on every open for writing, plus torch's zip writer, which opens in C++): the
grader keeps only the paths that still exist, so a temporary file or a cache that was
removed counts for nothing, and a rank that reports nothing still leaves its files here.

A writer the harness does not see (one that opens its file in C, or a rank that hid its record)
leaves a file no rank claims. Such a file is judged by what it is: its first bytes say whether it is
a saved model or state (a zip archive as ``torch.save`` and TorchScript write, a pickle, NumPy, HDF5,
safetensors), and a name that carries a rank number (``model_rank1.pt``, ``ckpt-gpu1.pth``) says whose
it is. ``unclaimed`` lists the checkpoints no rank claimed, with the rank their name gives, if any.
Weights a C writer leaves can start like anything (raw floats, a database), so ``loose`` keeps the
size of every other file rank 0 did not write: the check weighs it against the evaluated model.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from coursework.report import text
from graders.evidence import SOURCE_CROSS_CHECKED

MAX_ENTRIES = 2000
MAX_DEPTH = 4
SKIP_DIRS = {"__pycache__", ".cache", "triton", ".triton"}  # compiler caches, not the script's output
SKIP_PREFIXES = ("torchinductor_",)


def scan(work: Path) -> dict[str, int]:
    """``{absolute path: size}`` of regular files under ``work`` (no symlinks followed, bounded)."""
    out: dict[str, int] = {}
    stack = [(str(work), 0)]
    seen = 0
    while stack and seen < MAX_ENTRIES:
        folder, depth = stack.pop()
        try:
            it = os.scandir(folder)
        except OSError:
            continue
        with it:
            for entry in it:
                seen += 1
                if seen > MAX_ENTRIES:
                    break
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if depth < MAX_DEPTH and entry.name not in SKIP_DIRS and not entry.name.startswith(SKIP_PREFIXES):
                        stack.append((entry.path, depth + 1))
                elif stat.S_ISREG(st.st_mode):
                    out[entry.path] = st.st_size
    return out


def rank_writes(stream) -> list[str]:
    """Paths one rank's harness saw opened for writing (schema-checked here: unknown record type)."""
    out = []
    for rec in stream.of("writes") if stream is not None else []:
        paths = rec.get("paths")
        if not isinstance(paths, list):
            continue
        for item in paths[:64]:
            if isinstance(item, list) and item and isinstance(item[0], str):
                out.append(item[0][:300])
    return out


CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".pkl", ".pickle", ".safetensors", ".npz", ".npy", ".h5")
MAX_SNIFFED = 200  # files whose first bytes are read
_RANK_IN_NAME = re.compile(r"(?<![A-Za-z])(?:rank|gpu|proc|worker|device|dev|local|node|cuda|r)[-_. ]?(\d{1,3})(?!\d)", re.IGNORECASE)


def is_checkpoint(path: str) -> bool:
    """Does the file's name or its first bytes say it holds a saved model or state?"""
    if path.lower().endswith(CHECKPOINT_SUFFIXES):
        return True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, 16)
    except OSError:
        return False
    finally:
        os.close(fd)
    if head[:4] == b"PK\x03\x04" or head[:6] == b"\x93NUMPY" or head[:4] == b"\x89HDF":
        return True
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:  # a pickle, protocol 2 to 5
        return True
    return len(head) >= 10 and head[8:10] == b'{"'  # safetensors: 8-byte header length, then JSON


def rank_in_name(relative: str, nproc: int) -> int | None:
    """The rank a file's name gives (``model_rank1.pt`` -> 1), or None (no rank word, or not a rank here)."""
    found = [int(m.group(1)) for m in _RANK_IN_NAME.finditer(os.path.basename(relative))]
    return found[-1] if found and 0 <= found[-1] < nproc else None


MAX_LOOSE = 20  # files that are no checkpoint by name or content, kept with their size (largest first)


def created_files(run, work: Path) -> dict:
    """``{"source", "left": n, "ranks": {rank: [relative paths that rank wrote and the run left]},
    "checkpoints": {rank: [those of them that are checkpoints by name or content]},
    "unclaimed": [[relative path, rank its name gives or None], ...]} (checkpoints no rank claimed),
    "sizes": {relative path: bytes} of those checkpoints, claimed or not,
    "loose": [[relative path, bytes, rank that wrote it or None, rank its name gives or None], ...]}``:
    the other files rank 0 did not write, which the check judges by size against the evaluated model
    (a writer in C leaves weights that start like nothing in particular: raw floats, a database)."""
    left = scan(work)
    ranks, claimed, saved, writer = {}, set(), {}, {}
    for r in range(run.nproc):
        mine = sorted({p for p in rank_writes(run.ranks.get(r)) if p in left})
        claimed.update(mine)
        for p in mine:
            writer.setdefault(p, r)
        ranks[r] = [os.path.relpath(p, work)[:200] for p in mine][:20]
        saved[r] = [os.path.relpath(p, work)[:200] for p in mine[:MAX_SNIFFED] if is_checkpoint(p)][:20]
    rank0 = set(rank_writes(run.ranks.get(0)))
    unclaimed, loose = [], []
    for p in sorted(set(left) - rank0, key=lambda p: -left[p])[:MAX_SNIFFED]:
        rel = os.path.relpath(p, work)[:200]
        if p not in claimed and is_checkpoint(p):
            unclaimed.append([rel, rank_in_name(rel, run.nproc)])
        elif p not in claimed or not is_checkpoint(p):
            loose.append([rel, left[p], writer.get(p), rank_in_name(rel, run.nproc)])
    named = [f for f in loose if f[3]]  # a name with a non-zero rank counts whatever its size
    loose = named[:MAX_LOOSE] + [f for f in loose if not f[3]][:MAX_LOOSE]
    unclaimed = sorted(unclaimed)[:20]
    rel_size = {os.path.relpath(p, work)[:200]: n for p, n in left.items()}
    listed = {f for files in saved.values() for f in files} | {f for f, _ in unclaimed}
    return {"source": SOURCE_CROSS_CHECKED, "what": text("工作目录里留下的文件，按打开它们的 rank 分", "files left in the work folder, by the rank that opened them"),
            "left": len(left), "ranks": ranks, "checkpoints": saved, "unclaimed": unclaimed, "loose": loose,
            "sizes": {f: rel_size[f] for f in sorted(listed) if f in rel_size}}
