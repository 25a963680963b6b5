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
size of every other file rank 0 did not write: the check weighs it against the evaluated model. A file
whose first bytes are text is a log or a metrics file, whatever its name or size, and is called one.

The whole folder is listed, however deep (a run folder ``outputs/<run>/<date>/rank1/checkpoints/`` is as
much the script's as the top level). Compiler caches (inductor's, triton's, ``__pycache__``) are
listed too, since their names are the script's to choose: what a compiler writes there (source, shared
objects, its own pickles with no suffix) is left alone, but a saved model found there by its suffix or
its first bytes (a zip archive, NumPy, HDF5, safetensors: formats no compiler cache writes), a pickle of
NumPy arrays, and a log by its name whose first bytes are text count like any other. ``.cache`` itself (the
job's ``XDG_CACHE_HOME``) is no compiler's folder, only the root the compilers' folders live in: what a script
puts beside them is judged as anywhere else in the work folder.

Outside the work folder (the sandbox's /tmp ends with the run) the grader cannot read a file, only the
rank's record of opening it: ``elsewhere`` holds what a rank above 0 wrote there that its name does not call
code, a compiler's cache or a log (those are ``elsewhere_logs``), whatever its suffix: unread counts against the
run. What the grader could not list (a folder it cannot read, more entries than it lists, or one
nested past any honest depth) is named in ``unlisted``: the check cannot confirm what it did not see.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from coursework.report import text
from graders.evidence import SOURCE_CROSS_CHECKED

MAX_ENTRIES = 20000  # a bound on the listing, not a place to hide: past it the listing is incomplete
MAX_DEPTH = 32  # folders below it are not listed, and named as unlisted
# compilers' own folders, not the script's output (the job points TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR at
# .cache/torchinductor and .cache/triton; .cache itself is XDG_CACHE_HOME, where a script's folder is its own; the
# CUDA driver's JIT cache is ~/.nv/ComputeCache, HOME being the work folder) ...
CACHE_DIRS = {"__pycache__", "torchinductor", "triton", ".triton", "torch_extensions", "ComputeCache"}
CACHE_PREFIXES = ("torchinductor_",)  # ... unless what is in them is the script's all the same (``cached_output``)
MAX_UNLISTED = 20


def _is_cache(name: str) -> bool:
    return name in CACHE_DIRS or name.startswith(CACHE_PREFIXES)


def walk(work: Path) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """``({path: size} of regular files, {path: size} of those inside a compiler cache, [folders not
    listed]``) under ``work``: no symlink followed, bounded in entries and depth, and what the bounds or an
    unreadable folder kept out is named, never dropped in silence."""
    out: dict[str, int] = {}
    cached: dict[str, int] = {}
    unlisted: list[str] = []
    stack = [(str(work), 0, False)]
    seen = 0
    while stack:
        folder, depth, in_cache = stack.pop()
        if seen >= MAX_ENTRIES:
            unlisted.append(folder)
            continue
        try:
            it = os.scandir(folder)
        except OSError:
            unlisted.append(folder)
            continue
        with it:
            for entry in it:
                seen += 1
                if seen > MAX_ENTRIES:
                    unlisted.append(folder)
                    break
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    unlisted.append(entry.path)
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if depth < MAX_DEPTH:
                        stack.append((entry.path, depth + 1, in_cache or _is_cache(entry.name)))
                    else:
                        unlisted.append(entry.path)
                elif stat.S_ISREG(st.st_mode):
                    (cached if in_cache else out)[entry.path] = st.st_size
    return out, cached, unlisted


def scan(work: Path) -> dict[str, int]:
    """``{absolute path: size}`` of regular files under ``work`` outside compiler caches (``walk``)."""
    return walk(work)[0]


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
LOG_SUFFIXES = (".csv", ".tsv", ".log", ".txt", ".json", ".jsonl", ".out")  # what a log or metrics file is called
CODE_SUFFIXES = (".py", ".pyc", ".c", ".cc", ".cpp", ".h", ".cu", ".so", ".o", ".lock")  # a compiler's, a library's
MAX_SNIFFED = 200  # files whose first bytes are read
_RANK_IN_NAME = re.compile(r"(?<![A-Za-z])(?:rank|gpu|proc|worker|device|dev|local|node|cuda|r)[-_. ]?(\d{1,3})(?!\d)", re.IGNORECASE)


def _head(path: str, n: int = 512) -> bytes | None:
    """The first ``n`` bytes of a regular file (no symlink followed), or None where it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, n)
    except OSError:
        return None
    finally:
        os.close(fd)


def _saved_format(head: bytes) -> bool:
    """Formats of a saved model or array no compiler cache writes: zip (torch.save, TorchScript), NumPy,
    HDF5, safetensors (an 8-byte header length, then JSON)."""
    return (head[:4] == b"PK\x03\x04" or head[:6] == b"\x93NUMPY" or head[:4] == b"\x89HDF"
            or (len(head) >= 10 and head[8:10] == b'{"'))


def is_checkpoint(path: str) -> bool:
    """Does the file's name or its first bytes say it holds a saved model or state?"""
    if path.lower().endswith(CHECKPOINT_SUFFIXES):
        return True
    head = _head(path, 16)
    if not head:
        return False
    if _saved_format(head):
        return True
    return _is_pickle(head)


def cached_checkpoint(path: str) -> bool:
    """A file in a compiler cache that is a saved model all the same: by its suffix, or by a format of saved
    models (a compiler keeps its own pickles there, so a bare pickle is the cache's unless it holds NumPy
    arrays, which no compiler pickles: ``pickles_arrays``)."""
    if path.lower().endswith(CHECKPOINT_SUFFIXES):
        return True
    head = _head(path, 16)
    return bool(head) and (_saved_format(head) or pickles_arrays(path))


def cached_output(path: str) -> bool:
    """A file in a compiler cache that is the script's all the same: a saved model (``cached_checkpoint``), or a
    log or metrics file by its name (no compiler writes a .csv or a .log) whose first bytes are text."""
    low = path.lower()
    return cached_checkpoint(path) or (low.endswith(LOG_SUFFIXES) and not low.endswith(".json") and is_text(path))


# A pickled NumPy array names its module's reconstructor: protocol 2 (GLOBAL) and 4-5 (STACK_GLOBAL, or _frombuffer
# with out-of-band buffers) alike spell the module out. These names appear in a pickle only as a global to call.
_NUMPY_GLOBALS = (b"numpy.core.multiarray", b"numpy._core.multiarray", b"numpy.core.numeric", b"numpy._core.numeric")
MAX_PICKLE_SCAN = 1 << 20  # bytes of a pickle searched for NumPy's names


def _is_pickle(head: bytes) -> bool:
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5  # a pickle, protocol 2 to 5


def pickles_arrays(path: str) -> bool:
    """Is the file a pickle that holds NumPy arrays (saved weights, an optimizer's state, whatever its name)?"""
    head = _head(path, MAX_PICKLE_SCAN)
    return bool(head) and _is_pickle(head) and any(g in head for g in _NUMPY_GLOBALS)


_TEXT_BYTES = set(range(32, 127)) | {9, 10, 13, 27}


def is_text(path: str) -> bool:
    """Do the file's first bytes read as text (UTF-8, no NUL, few control bytes): a log or metrics file,
    never saved weights, whatever its name says."""
    head = _head(path)
    if not head or b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # a character cut at the end of the head is still text
            return False
    return sum(b in _TEXT_BYTES or b >= 0x80 for b in head) >= 0.95 * len(head)


def rank_in_name(relative: str, nproc: int) -> int | None:
    """The rank a file's name gives (``model_rank1.pt`` -> 1), or None (no rank word, or not a rank here)."""
    found = [int(m.group(1)) for m in _RANK_IN_NAME.finditer(os.path.basename(relative))]
    return found[-1] if found and 0 <= found[-1] < nproc else None


def _found(written: list[str], left: dict[str, int]) -> set[str]:
    """The listed paths a rank's ``writes`` name. The harness keeps a path's last 300 characters, so a longer
    one (folders nested to make it long) arrives as a tail, not an absolute path: matched by its ending."""
    found = {p for p in written if p in left}
    tails = [p for p in written if not p.startswith("/")][:64]
    if tails:
        found.update(q for q in left if q.endswith(tuple(tails)))
    return found


MAX_LOOSE = 20  # files that are no checkpoint by name or content, kept with their size (largest first)


def created_files(run, work: Path) -> dict:
    """``{"source", "left": n, "ranks": {rank: [relative paths that rank wrote and the run left]},
    "checkpoints": {rank: [those of them that are checkpoints by name or content]},
    "unclaimed": [[relative path, rank its name gives or None], ...]} (checkpoints no rank claimed),
    "sizes": {relative path: bytes} of those checkpoints, claimed or not,
    "loose": [[relative path, bytes, rank that wrote it or None, rank its name gives or None, text?], ...],
    "shared_paths": [relative paths rank 0 wrote and another rank wrote too],
    "texts": [relative paths a rank other than 0 wrote (or that no rank claimed) whose first bytes are text],
    "unlisted": [relative folders the listing could not see],
    "elsewhere": {rank: [files that rank wrote outside the work folder, taken for checkpoints: ``_unread_kind``]},
    "elsewhere_logs": {rank: [logs by name that rank wrote outside the work folder]}}``: the sandbox's /tmp and
    /dev/shm end with the run, so the grader cannot read them; the rank's word that it wrote one counts against it
    (a file the script removed from the work folder is a temporary one and counts for nothing). ``loose`` are the
    other files rank 0 did not write (or wrote, as another rank did: ``shared_paths``), which the check judges by
    size against the evaluated model (a writer in C leaves weights that start like nothing in particular: raw
    floats, a database), unless they are text."""
    left, cached, unlisted = walk(work)
    left.update((p, n) for p, n in cached.items() if cached_output(p))  # heads of 16 bytes, a pickle's first MiB
    ranks, claimed, saved, writer, ranks_found = {}, set(), {}, {}, {}
    for r in range(run.nproc):
        mine = sorted(_found(rank_writes(run.ranks.get(r)), left))
        ranks_found[r] = set(mine)
        claimed.update(mine)
        for p in mine:
            writer.setdefault(p, r)
        ranks[r] = [os.path.relpath(p, work)[:200] for p in mine][:20]
        saved[r] = [os.path.relpath(p, work)[:200] for p in mine[:MAX_SNIFFED] if is_checkpoint(p)][:20]
    inside = str(work).rstrip("/") + "/"
    elsewhere, elsewhere_logs = {}, {}
    for r in range(1, run.nproc):
        outside = sorted({p for p in rank_writes(run.ranks.get(r)) if p.startswith("/") and not p.startswith(inside)})
        kinds = [(p, _unread_kind(p)) for p in outside]
        elsewhere[r] = [p for p, kind in kinds if kind == "saved"][:20]
        elsewhere_logs[r] = [p for p, kind in kinds if kind == "log"][:20]
    rank0 = ranks_found.get(0, set())  # found once, above
    # A file rank 0 wrote and another rank wrote too (every rank writing one path): judged as that rank's, by size
    # like the others, unless it reads as text (N ranks appending to one log is output, judged as such).
    shared = {p: next(r for r in range(1, run.nproc) if p in ranks_found[r])
              for p in rank0 if any(p in ranks_found[r] for r in range(1, run.nproc))}
    unclaimed, loose, texts = [], [], []
    for p in sorted((set(left) - rank0) | set(shared), key=lambda p: -left[p])[:MAX_SNIFFED]:
        rel = os.path.relpath(p, work)[:200]
        text_file = not rel.lower().endswith(CHECKPOINT_SUFFIXES) and is_text(p)  # a log, whatever its name
        if p in shared:
            if not text_file and not is_checkpoint(p):  # a checkpoint by content is the rank's already (``saved``)
                loose.append([rel, left[p], shared[p], rank_in_name(rel, run.nproc), False])
            continue
        if text_file:
            texts.append(rel)
        if p not in claimed and not text_file and is_checkpoint(p):
            unclaimed.append([rel, rank_in_name(rel, run.nproc)])
        elif p not in claimed or text_file or not is_checkpoint(p):
            loose.append([rel, left[p], writer.get(p), rank_in_name(rel, run.nproc), text_file])
    named = [f for f in loose if f[3]]  # a name with a non-zero rank counts whatever its size
    loose = named[:MAX_LOOSE] + [f for f in loose if not f[3]][:MAX_LOOSE]
    unclaimed = sorted(unclaimed)[:20]
    rel_size = {os.path.relpath(p, work)[:200]: n for p, n in left.items()}
    listed = {f for files in saved.values() for f in files} | {f for f, _ in unclaimed}
    return {"source": SOURCE_CROSS_CHECKED, "what": text("工作目录里留下的文件，按打开它们的 rank 分", "files left in the work folder, by the rank that opened them"),
            "left": len(left), "ranks": ranks, "checkpoints": saved, "unclaimed": unclaimed, "loose": loose,
            "sizes": {f: rel_size[f] for f in sorted(listed) if f in rel_size},
            "shared_paths": sorted(os.path.relpath(p, work)[:200] for p in shared)[:MAX_LOOSE],
            "texts": sorted(texts)[:MAX_LOOSE], "unlisted": sorted({os.path.relpath(p, work)[:200] for p in unlisted})[:MAX_UNLISTED],
            "elsewhere": {r: [p[:200] for p in paths] for r, paths in elsewhere.items() if paths},
            "elsewhere_logs": {r: [p[:200] for p in paths] for r, paths in elsewhere_logs.items() if paths}}


def _unread_kind(path: str) -> str | None:
    """What a file the grader cannot read (outside the work folder) is taken for, by its name alone: a checkpoint
    suffix is ``"saved"``; code, a build product or anything in a compiler's cache is nobody's output (None); a
    log's suffix is ``"log"``; any other name is ``"saved"``: its content is unknown, and unknown counts against
    the run (a pickle called ``scratch.state`` is as much a checkpoint as ``ckpt.pkl``)."""
    low = path.lower()
    if low.endswith(CHECKPOINT_SUFFIXES):
        return "saved"
    if low.endswith(CODE_SUFFIXES) or any(_is_cache(part) for part in path.split("/")[:-1]):
        return None
    return "log" if low.endswith(LOG_SUFFIXES) or "tfevents" in low else "saved"
