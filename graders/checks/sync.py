"""Gradient synchronisation and rank-0 output judged on evidence a decoy cannot satisfy.

* ``compare_params``: the parameters the optimizers actually step (every param group), compared
  across ranks at the same step numbers during training (the harness's ``params`` records). A
  decoy DDP on a throw-away module, a reduction on a group of one, or an all-reduced buffer
  thrown away all leave the stepped parameters different after the first step, whatever a
  broadcast at the end does to the final ones.
* ``ddp_drives``: DDP counts as the synchroniser only if it wraps the stepped parameters and its
  gradient hook fired.
* ``loopback_shortfall``: a gloo run said to be synchronised must have moved at least a
  fraction of the gradient volume between ranks (the host's counters, ``graders.evidence.host``).
* ``rank_output``: per-rank output lines and files from ``graders.evidence`` (outside).
"""
from __future__ import annotations

from typing import Any



# What a saved model or state looks like: other files a rank leaves (a TensorBoard event file, a per-rank
# log) are shown as evidence but are not checkpoints.
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".pkl", ".pickle", ".safetensors", ".npz", ".npy", ".h5")
MIN_TRAFFIC_FRACTION = 0.02  # of the least all-reduce volume: catches "nothing moved", spares compressing comm hooks


def _params(stream) -> dict[int, dict]:
    """step -> that rank's ``params`` record (schema-checked here: a type integrity does not know)."""
    out = {}
    for rec in stream.of("params") if stream is not None else []:
        step, digest = rec.get("step"), rec.get("digest")
        if isinstance(step, int) and not isinstance(step, bool) and isinstance(digest, str) and len(digest) <= 64:
            out.setdefault(step, rec)
    return out


def compare_params(run) -> dict[str, Any] | None:
    """None when no rank sent ``params``; else ``{"compared": steps, "differ": first mismatch or None,
    "sharded": bool}``. A mismatch names the step, the ranks and the largest relative difference."""
    per_rank = {r: _params(run.ranks.get(r)) for r in range(run.nproc)}
    if not all(per_rank.values()):
        return None
    if any(rec.get("sharded") is True for recs in per_rank.values() for rec in recs.values()):
        return {"compared": [], "differ": None, "sharded": True}
    common = sorted(set.intersection(*(set(recs) for recs in per_rank.values())))
    for step in common:
        ref = per_rank[0][step]
        for r in range(1, run.nproc):
            rec = per_rank[r][step]
            if rec.get("digest") != ref.get("digest"):
                return {"compared": common, "differ": {"step": step, "rank": r, "diff": _rel_diff(ref, rec)},
                        "sharded": False}
    return {"compared": common, "differ": None, "sharded": False}


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


def loopback_shortfall(run, steps: int) -> dict[str, Any] | None:
    """The host's loopback bytes against the least an all-reduce of the stepped parameters moves,
    or None where the traffic is not seen or is enough."""
    host = (getattr(run, "evidence", None) or {}).get("host") or {}
    lo = host.get("loopback") or {}
    if not lo.get("seen"):
        return None
    elements = [rec.get("elements") for rec in _params(run.ranks.get(0)).values()]
    elements = [e for e in elements if isinstance(e, int)]
    if not elements or steps <= 0:
        return None
    n = run.nproc
    least = MIN_TRAFFIC_FRACTION * 2 * (n - 1) * 4 * max(elements) * steps
    moved = int(lo.get("bytes") or 0)
    if moved >= least:
        return None
    return {"moved": moved, "least": int(least), "steps": steps, "elements": max(elements)}


def rank_output(run) -> dict[int, dict[str, Any]]:
    """rank -> stdout/stderr lines, checkpoint-like ``files`` it wrote that the run left, and ``other_files``."""
    ev = getattr(run, "evidence", None) or {}
    outs = (ev.get("outputs") or {}).get("ranks") or {}
    made = (ev.get("files") or {}).get("ranks") or {}
    out = {}
    for r in range(1, run.nproc):
        o = outs.get(r) or {}
        left = [str(f) for f in (made.get(r) or [])]
        out[r] = {"stdout_lines": int(o.get("stdout_lines") or 0), "stderr_lines": int(o.get("stderr_lines") or 0),
                  "files": [f for f in left if f.lower().endswith(CHECKPOINT_SUFFIXES)],
                  "other_files": [f for f in left if not f.lower().endswith(CHECKPOINT_SUFFIXES)]}
    return out





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
