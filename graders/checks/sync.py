"""Gradient synchronisation and rank-0 output judged on evidence a decoy cannot satisfy.

* ``compare_params``: the parameters of the module that learned (whose forward took the training
  batches and whose backward ran; an optimizer's list only where no such module was seen), compared
  across ranks after *every* step (each step row carries their digest). A decoy DDP, a shadow head
  that is all ``torch.optim`` steps, a reduction on a group of one, local SGD averaged on a few
  steps: all leave the trained parameters different after some step, whatever a broadcast at the
  end does. No step is exempt, so no schedule can be learnt from the harness.
* ``ddp_drives``: DDP counts as the synchroniser only if it wraps the trained parameters and its
  gradient hook fired.
* ``loopback_shortfall``: a gloo run said to be synchronised must have moved, between ranks, most
  of what a ring all-reduce of the trained parameters' gradients moves every step (the host's
  counters, ``graders.evidence.host``).
* ``rank_output``: per-rank output lines and files from ``graders.evidence`` (outside).
"""
from __future__ import annotations

from typing import Any

from graders.checks.records import step_rows
from graders.evidence.files import CHECKPOINT_SUFFIXES  # what a saved model or state is called

# Of what a ring all-reduce of fp32 gradients moves per step (every rank sends 2(N-1)/N of them). An fp16 or bf16
# compressing comm hook moves half; local SGD that averages every k-th step moves 1/k.
MIN_TRAFFIC_FRACTION = 0.35


def _params(stream) -> dict[int, dict]:
    """step -> that rank's ``params`` record (schema-checked here: a type integrity does not know)."""
    out = {}
    for rec in stream.of("params") if stream is not None else []:
        step, digest = rec.get("step"), rec.get("digest")
        if isinstance(step, int) and not isinstance(step, bool) and isinstance(digest, str) and len(digest) <= 64:
            out.setdefault(step, rec)
    return out


def _step_digests(stream) -> list:
    """The trained parameters' digest after each step of a rank (None where the row has none)."""
    return [row.get("pd") for row in step_rows(stream)] if stream is not None else []


def compare_params(run) -> dict[str, Any] | None:
    """None when no rank sent ``params``; else ``{"compared": steps, "differ": first mismatch or None,
    "sharded": bool, "every_step": bool}``. Every step both ranks took is compared (``every_step``: each
    rank sent a digest for each of its steps); a mismatch names the step, the ranks and the largest
    relative difference of the nearest full record."""
    per_rank = {r: _params(run.ranks.get(r)) for r in range(run.nproc)}
    if not all(per_rank.values()):
        return None
    if any(rec.get("sharded") is True for recs in per_rank.values() for rec in recs.values()):
        return {"compared": [], "differ": None, "sharded": True, "every_step": False}
    digests = {r: _step_digests(run.ranks.get(r)) for r in range(run.nproc)}
    every = all(d and all(isinstance(x, str) for x in d) for d in digests.values())
    common = set.intersection(*(set(recs) for recs in per_rank.values()))
    if every:
        common |= set(range(1, min(len(d) for d in digests.values()) + 1))
    common = sorted(common)
    for step in common:
        for r in range(1, run.nproc):
            a, b = _digest_at(per_rank[0], digests[0], step), _digest_at(per_rank[r], digests[r], step)
            if a != b:
                later = [s for s in sorted(set(per_rank[0]) & set(per_rank[r])) if s >= step
                         and per_rank[0][s].get("digest") != per_rank[r][s].get("digest")]
                diff = _rel_diff(per_rank[0][later[0]], per_rank[r][later[0]]) if later else float("nan")
                return {"compared": common, "differ": {"step": step, "rank": r, "diff": diff},
                        "sharded": False, "every_step": every}
    return {"compared": common, "differ": None, "sharded": False, "every_step": every}


def _digest_at(records: dict[int, dict], digests: list, step: int) -> str | None:
    """A rank's digest after ``step`` (1-based): its step row's, else its full record's (shortened alike)."""
    if 0 < step <= len(digests) and isinstance(digests[step - 1], str):
        return digests[step - 1]
    rec = records.get(step)
    return str(rec.get("digest"))[:16] if rec else None


def _rel_diff(a: dict, b: dict) -> float:
    xs, ys = a.get("sums"), b.get("sums")
    if not isinstance(xs, list) or not isinstance(ys, list):
        return float("nan")
    diffs = [abs(x - y) / max(abs(x), abs(y), 1e-12) for x, y in zip(xs, ys)
             if isinstance(x, (int, float)) and isinstance(y, (int, float))]
    return max(diffs, default=0.0)


def ddp_drives(run, step_rows) -> bool:
    """DDP wraps (nearly) all stepped parameters on every rank and its gradient hook fired."""
    for r in range(run.nproc):
        s = run.ranks.get(r)
        norms = s.first("norms") if s else None
        if norms is None:
            return False
        stepped, in_ddp = norms.get("stepped"), norms.get("in_ddp")
        if isinstance(stepped, int) and isinstance(in_ddp, int) and stepped and in_ddp < 0.9 * stepped:
            return False
        if not any(row.get("synced") for row in step_rows(s)):
            return False
    return True


def model_unseen(run) -> dict[int, str] | None:
    """rank -> what its parameters came from, where on the grader's synthetic images some rank judged an
    optimizer's list (or nothing) instead of the module that took the training batches; else None."""
    if not ((getattr(run, "evidence", None) or {}).get("inputs") or {}).get("train_size"):
        return None  # real data (a GPU host): the layout of its batches is the script's
    sources, any_records = {}, False
    for r in range(run.nproc):
        recs = _params(run.ranks.get(r))
        any_records = any_records or bool(recs)
        sources[r] = str(recs[max(recs)].get("source", "none"))[:20] if recs else "none"
    if not any_records:
        return None  # no step compared at all: the end digests decide (compare_params is None too)
    return sources if any(v != "trained" for v in sources.values()) else None


def loopback_reading(run, steps: int) -> dict[str, Any] | None:
    """The host's loopback bytes beside what a ring all-reduce of the trained parameters' fp32 gradients (as many
    as the harness counted, and at least the trainable parameters of the model the grader evaluated)
    moves in ``steps`` steps (every rank sends 2(N-1)/N of them each step, all ranks together 2(N-1)), or
    None where the traffic is not seen (no network namespace of its own, NCCL) or nothing says how much."""
    host = (getattr(run, "evidence", None) or {}).get("host") or {}
    lo = host.get("loopback") or {}
    if not lo.get("seen"):
        return None
    elements = [rec.get("elements") for rec in _params(run.ranks.get(0)).values()]
    model = (getattr(run, "evidence", None) or {}).get("model") or {}
    elements.append(model.get("parameters") if model.get("evaluated") else None)  # counted by the grader itself
    elements = [e for e in elements if isinstance(e, int) and not isinstance(e, bool)]
    if not elements or steps <= 0:
        return None
    ring = 2 * (run.nproc - 1) * 4 * max(elements) * steps
    hooked = _hook_ring(run)
    if hooked is not None and 0 < hooked < ring:  # a compressing comm hook all-reduces less than the gradients
        ring = hooked
    moved = int(lo.get("bytes") or 0)
    return {"moved": moved, "ring": int(ring), "of_ring": round(moved / ring, 3) if ring else None,
            "least": int(MIN_TRAFFIC_FRACTION * ring), "steps": steps, "elements": max(elements),
            **({"comm_hook": True} if hooked is not None else {})}


def _hook_ring(run) -> int | None:
    """Where a DDP comm hook of the script's was registered: what a ring all-reduce of the bytes rank 0 handed to
    ``all_reduce`` moves, all ranks together (a compressing hook, PowerSGD or fp16, all-reduces its compressed
    factors). None without a hook. A hook that skips communicating claims little and lowers this floor, but then
    the ranks' parameters part after the first step, which ``compare_params`` sees whatever the traffic."""
    if not any(s.first("comm_hook") for s in run.ranks.values()):
        return None
    bytes_ = sum(row["ar"] for row in step_rows(run.ranks.get(0)) if isinstance(row.get("ar"), int)) \
        if run.ranks.get(0) is not None else 0
    return 2 * (run.nproc - 1) * bytes_


def loopback_shortfall(run, steps: int) -> dict[str, Any] | None:
    """``loopback_reading`` where the ranks moved less than ``MIN_TRAFFIC_FRACTION`` of the ring's bytes, else None."""
    got = loopback_reading(run, steps)
    return got if got is not None and got["moved"] < got["least"] else None


# Bytes per parameter of the most compact encoding of the weights a file is held to be: 4-bit quantisation. Half
# precision stores 2, int8 (numpy's tofile of a quantised copy) 1; a floor of 2 let int8 snapshots by every rank
# pass as anything but weights. A log or metrics file is never judged by size (text, or a binary log's name).
QUANTISED_BYTES_PER_PARAMETER = 0.5
BINARY_LOG_NAMES = ("tfevents",)  # TensorBoard's event files: binary records, but a log
# A file rank 0 and another rank both wrote counts as weights up to 8 bytes a parameter (float64, 16 times the
# 4-bit floor): larger, it is a data cache every rank built, output and not a copy of the model.
SHARED_MOST = 16
MAX_SHARED = 20


def checkpoint_bytes(run) -> int | None:
    """The least bytes a file holding the model's weights has: its parameters at 4 bits each
    (``QUANTISED_BYTES_PER_PARAMETER``), counted by the grader on the evaluated model, else by rank 0's
    harness (the fewer of the two where both are known); None where neither is."""
    model = (getattr(run, "evidence", None) or {}).get("model") or {}
    counts = [rec.get("elements") for rec in _params(run.ranks.get(0)).values()][:1]
    counts.append(model.get("parameters") if model.get("evaluated") else None)
    counts = [c for c in counts if isinstance(c, int) and not isinstance(c, bool) and c > 0]
    return max(1, int(QUANTISED_BYTES_PER_PARAMETER * min(counts))) if counts else None


def _loose(run) -> list[tuple[str, int | None, int | None]]:
    """``(path, rank that wrote it, rank its name gives)`` of the files rank 0 did not write (or wrote, as another
    rank did) that count as saved weights although they start like no checkpoint: a non-zero rank in the name, or
    model-sized (at 4 bits a parameter or more; at most 8 bytes where rank 0 wrote the path too). A file that reads
    as text is a log or metrics file, not weights, whatever its name or size, and so is a TensorBoard event file."""
    files = (getattr(run, "evidence", None) or {}).get("files") or {}
    least, out = checkpoint_bytes(run), []
    shared = {f for f in (files.get("shared_paths") or [])[:MAX_SHARED] if isinstance(f, str)}  # rank 0 wrote it too
    for item in files.get("loose") or []:
        if not (isinstance(item, list) and len(item) in (4, 5) and isinstance(item[1], int)):
            continue
        if len(item) == 5 and item[4] is True:
            continue
        path, size, writer, named = str(item[0]), item[1], item[2], item[3]
        writer = writer if isinstance(writer, int) and not isinstance(writer, bool) else None
        named = named if isinstance(named, int) and not isinstance(named, bool) else None
        binary_log = any(word in path.lower() for word in BINARY_LOG_NAMES)
        if path in shared and (least is None or size > SHARED_MOST * least):
            continue  # every rank writing one path much larger than the weights: a data cache, output
        if named or (least is not None and size >= least and not binary_log):
            out.append((path, writer, named))
    return out


def _unclaimed(run) -> list[tuple[str, int | None]]:
    """Checkpoints no rank claimed, with the rank their name gives: by content, or by size and name."""
    files = (getattr(run, "evidence", None) or {}).get("files") or {}
    got = [(str(f), named) for f, named in files.get("unclaimed") or []]
    return got + [(f, named) for f, writer, named in _loose(run) if writer is None]


def unlisted_folders(run) -> list[str]:
    """Folders of the work folder the grader's listing could not see (unreadable, past its bounds)."""
    files = (getattr(run, "evidence", None) or {}).get("files") or {}
    return [str(f)[:200] for f in (files.get("unlisted") or [])[:20] if isinstance(f, str)]


def unclaimed_checkpoints(run) -> list[str]:
    """Checkpoints the run left that no rank reported writing and whose name gives no rank."""
    return [f for f, named in _unclaimed(run) if named is None]


def _rank_paths(by_rank: dict, r: int) -> list[str]:
    """Rank ``r``'s paths in a ``{rank: [path, ...]}`` of the evidence (keys ints, or strings once stored as JSON)."""
    paths = by_rank.get(r, by_rank.get(str(r))) or []
    return [f[:200] for f in paths if isinstance(f, str)][:20]


def rank_output(run) -> dict[int, dict[str, Any]]:
    """rank -> stdout/stderr lines, redraws and bytes, the lines whose shape recurs, checkpoint-like ``files`` it
    wrote that the run left, ``other_files`` (with the logs it wrote outside the work folder), ``texts``: those of
    its files that read as text (a log or metrics file, whatever its name), and ``written``: the files it reported
    opening for writing that the run left."""
    ev = getattr(run, "evidence", None) or {}
    outs = (ev.get("outputs") or {}).get("ranks") or {}
    made = (ev.get("files") or {}).get("ranks") or {}
    out = {}
    unclaimed = _unclaimed(run)
    sniffed = (ev.get("files") or {}).get("checkpoints") or {}
    loose = _loose(run)
    weights = {f for f, writer, _ in loose if writer is not None}  # model-sized or rank-named, a rank wrote it
    texts = _texts(run)
    reached = (ev.get("host") or {}).get("output_reached") or {}
    elsewhere = (ev.get("files") or {}).get("elsewhere") or {}
    far_logs = (ev.get("files") or {}).get("elsewhere_logs") or {}
    for r in range(1, run.nproc):
        o = outs.get(r) or {}
        far = reached.get(r, reached.get(str(r))) or {}  # how far the rank's descriptors wrote, seen while it ran
        left = [str(f) for f in (made.get(r) or [])]
        left += [f for f, writer, _ in loose if writer == r and f not in left]
        named = [str(f) for f, rank in unclaimed if rank == r and str(f) not in left]  # no claim, its name says r
        saved = {str(f) for f in sniffed.get(r) or []} | set(named) | weights  # by first bytes, name or size
        left += named
        left += [f for f, rank in texts.items() if rank == r and f not in left]  # a log no rank claimed, named r
        gone = _rank_paths(elsewhere, r)  # checkpoints it wrote where the run's end removed them
        gone_logs = _rank_paths(far_logs, r)  # logs it wrote there: output, unread
        out[r] = {**{f"{kind}_{what}": _count(o.get(f"{kind}_{what}")) for kind in ("stdout", "stderr")
                     for what in ("lines", "redraws", "bytes")},
                  **{f"{kind}_recurring": _count(o.get(f"{kind}_recurring"))  # lines of a shape that comes back
                     for kind in ("stdout", "stderr")},
                  **{f"{kind}_reached": _count(far.get(kind) if isinstance(far, dict) else None)
                     for kind in ("stdout", "stderr")},
                  "files": [f for f in left if f in saved or f.lower().endswith(CHECKPOINT_SUFFIXES)],
                  "other_files": [f for f in left if not (f in saved or f.lower().endswith(CHECKPOINT_SUFFIXES))] + gone_logs,
                  "texts": [f for f in left if f in texts and f not in saved],
                  "written": [str(f) for f in (made.get(r) or [])],  # the rank opened it for writing: its output
                  "elsewhere": gone}
    return out


def _texts(run) -> dict[str, int | None]:
    """Files rank 0 did not write whose first bytes are text -> the rank its name gives where no rank claimed it
    (``graders.evidence.files``: ``texts``, and ``loose`` entries marked as text)."""
    files = (getattr(run, "evidence", None) or {}).get("files") or {}
    out: dict[str, int | None] = {str(f): None for f in files.get("texts") or [] if isinstance(f, str)}
    for item in files.get("loose") or []:
        if isinstance(item, list) and len(item) == 5 and item[4] is True and isinstance(item[0], str):
            writer, named = item[2], item[3]
            if writer is None and isinstance(named, int) and not isinstance(named, bool):
                out[item[0]] = named
    return out





def _count(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else 0


def params_frozen(run) -> bool:
    """Rank 0's stepped parameters were the same after its first step and at its end, over more than one
    step: the optimizer stepped without ever moving them (no backward, or zeroed gradients). This holds
    whatever model the script uses, where the grader's own evaluation cannot load it."""
    recs = _params(run.ranks.get(0)) if run is not None else {}
    if len(recs) < 2:
        return False
    steps = sorted(recs)
    first, last = recs[steps[0]], recs[steps[-1]]
    return steps[-1] > steps[0] and first.get("digest") == last.get("digest") and not first.get("sharded")
