"""The files a run left in its work folder, and which rank opened each for writing.

The folder is listed after the run by the grader (outside: the script cannot hide a file it
left there). Which rank wrote a file comes from the ``writes`` record of that rank's harness
(an audit hook on every open for writing, plus torch's zip writer, which opens in C++): the
grader keeps only the paths that still exist, so a temporary file or a cache that was
removed counts for nothing, and a rank that reports nothing still leaves its files here.
"""
from __future__ import annotations

import os
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


def created_files(run, work: Path) -> dict:
    """``{"source", "left": n, "ranks": {rank: [relative paths that rank wrote and the run left]}}``."""
    left = scan(work)
    ranks = {}
    for r in range(run.nproc):
        mine = sorted({p for p in rank_writes(run.ranks.get(r)) if p in left})
        ranks[r] = [os.path.relpath(p, work)[:200] for p in mine][:20]
    return {"source": SOURCE_CROSS_CHECKED, "what": text("工作目录里留下的文件，按打开它们的 rank 分", "files left in the work folder, by the rank that opened them"),
            "left": len(left), "ranks": ranks}
