"""Did every rank's local work reach the update? Judged on the sketches ``distgrade_harness.contrib`` sends per step.

Gradient synchronisation is not a collective's name: it is that each rank applies the mean of the ranks' local
gradients (DDP, an all_reduce, reduce then broadcast, all_gather then a mean, a comm hook), or, averaging the
parameters after a local step, that the parameters become the mean of what each rank's own step made. Both are
linear, and so are the sketches, so for every step both ranks took:

* ``mean``: each rank's applied gradient ``ga`` is a positive multiple of the mean of the ranks' local gradients
  ``gl`` (a multiple: clipping after the sync scales it alike on every rank), or, where each rank clipped its own
  gradient before the collective, a combination of them in which every rank weighs at least a fifth of the most;
* ``averaged``: each rank's update over the step span (``ps`` after it less ``ps`` before it) is the mean of the
  ranks' own steps (``pl`` less the same ``ps`` before);
* ``discarded``: neither, although every reading is there: some rank's work was thrown away (rank 0's weights or
  gradients broadcast over everyone else's).

A rank whose local gradient is zero (``gn``, its squared norm; DDP's buckets before their all-reduce) or far
smaller than the others' at most steps, or that has more all-zero gradient tensors than another rank at most steps
(``gz``: under SyncBatchNorm the layers after the last one), trained nothing: its data never moved the weights
(``loss * 0``).
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from graders.checks.records import step_rows

RESIDUAL = 0.02  # relative distance between an applied update and the mean it should be (float sums, fp16 copies)
DISCARDED_SHARE = 0.05  # of the judged steps: more discarded than this fails the run
MIN_STEPS = 2  # discarded steps a failure needs at least
IDLE_NORM_RATIO = 0.05  # a rank's median local gradient norm below this share of the largest rank's: it did not train
K = 8  # numbers per sketch (distgrade_harness.contrib.K)


def _vec(x: Any) -> list[float] | None:
    if isinstance(x, list) and len(x) == K and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                  and math.isfinite(v) for v in x):
        return [float(v) for v in x]
    return None


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def _sub(a: list[float], b: list[float]) -> list[float]:
    return [x - y for x, y in zip(a, b)]


def _mean(vs: list[list[float]]) -> list[float]:
    return [sum(col) / len(vs) for col in zip(*vs)]


def _residual(got: list[float], want: list[float], scaled: bool) -> float:
    """How far ``got`` is from ``want`` (or, ``scaled``, from its best positive multiple), relative to ``want``."""
    size = _norm(want)
    if size == 0.0:
        return 0.0 if _norm(got) == 0.0 else math.inf
    c = 1.0
    if scaled:
        c = sum(x * y for x, y in zip(got, want)) / (size * size)
        if c <= 0:
            return math.inf
    return _norm(_sub(got, [c * y for y in want])) / (c * size)


def _spread(vs: list[list[float]]) -> bool:
    """Do the ranks' readings differ (a collective had something to do)?"""
    m = _mean(vs)
    return any(_residual(v, m, scaled=False) > RESIDUAL for v in vs)


def step_verdict(rows: list[dict], before: list[dict | None]) -> str | None:
    """One step's verdict from each rank's row (and its row of the step before): "mean" or "averaged" (the
    ranks' inputs differed and the update is their mean), "equal" (the inputs were already equal: DDP, or a
    sync inside backward), "discarded", or None (no reading)."""
    gl, ga = [_vec(r.get("gl")) for r in rows], [_vec(r.get("ga")) for r in rows]
    grads = None
    if all(gl) and all(ga) and _norm(_mean(gl)) > 0.0:
        mean = _mean(gl)
        grads = all(_residual(a, mean, scaled=True) <= RESIDUAL for a in ga)
        if grads:
            return "mean" if _spread(gl) else "equal"
        if _spread(gl) and all(_every_rank_weighed(a, gl) for a in ga):
            return "mean"  # each rank scaled (clipped) its own gradient before the collective averaged them
        if not all(_residual(a, own, scaled=True) <= RESIDUAL for a, own in zip(ga, gl)):
            return "discarded"  # the gradients were changed, into something other than their mean (rank 0's)
        # each rank stepped its own gradient: the parameters averaged after the step decide
    pl, ps = [_vec(r.get("pl")) for r in rows], [_vec(r.get("ps")) for r in rows]
    prev = [_vec(b.get("ps")) if b else None for b in before]
    params = None
    if all(pl) and all(ps) and all(prev):
        own = [_sub(p, q) for p, q in zip(pl, prev)]
        applied = [_sub(p, q) for p, q in zip(ps, prev)]
        mean = _mean(own)
        if _norm(mean) > 0.0:
            params = all(_residual(a, mean, scaled=False) <= RESIDUAL for a in applied)
            if params:
                return "averaged" if _spread(own) else "equal"
    if grads is None and params is None:
        return None
    return "discarded"


MIN_WEIGHT = 0.2  # of the largest: a rank's gradient weighed less than this in the update was mostly left out


def _every_rank_weighed(applied: list[float], local: list[list[float]]) -> bool:
    """Is ``applied`` a combination of the ranks' local gradients with every rank's weight positive and at least
    ``MIN_WEIGHT`` of the largest (least squares over the ``K`` sketch numbers)? Clipping each rank's gradient before
    averaging weighs them by different factors; only with at most ``K // 2`` ranks is the fit overdetermined enough
    to mean anything."""
    n = len(local)
    if n > K // 2:
        return False
    gram = [[sum(x * y for x, y in zip(a, b)) for b in local] for a in local]
    rhs = [sum(x * y for x, y in zip(a, applied)) for a in local]
    w = _solve(gram, rhs)
    if w is None or min(w) <= 0 or min(w) < MIN_WEIGHT * max(w):
        return False
    fitted = [sum(c * g[i] for c, g in zip(w, local)) for i in range(K)]
    return _residual(applied, fitted, scaled=False) <= RESIDUAL


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """``x`` with ``a x = b`` (Gaussian elimination with partial pivoting), or None where ``a`` is singular."""
    n = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-12 * max(1.0, max(abs(v) for row in a for v in row)):
            return None
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col])]
    return [m[r][n] / m[r][r] for r in range(n)]


def _lost_rank(rows: list[dict], before: list[dict | None]) -> int | None:
    """The rank whose own work is furthest from the update rank 0 applied (its gradient, else its own step)."""
    gl, ga = [_vec(r.get("gl")) for r in rows], _vec(rows[0].get("ga"))
    pairs = list(zip(gl, [ga] * len(gl)))
    if not (all(gl) and ga):
        pl, ps, prev = [_vec(r.get("pl")) for r in rows], _vec(rows[0].get("ps")), _vec((before[0] or {}).get("ps"))
        if not (all(pl) and ps and prev):
            return None
        pairs = [(_sub(p, prev), _sub(ps, prev)) for p in pl]
    far = [_residual(applied, own, scaled=True) for own, applied in pairs]
    return max(range(len(far)), key=lambda r: far[r])


def judge(run) -> dict[str, Any] | None:
    """``{"steps": judged, "verdicts": {verdict: count}, "discarded": [first steps], "discarded_rank": rank whose
    update is furthest from the mean, "idle": rank or None, "norms": per-rank median squared norm}``, or None where
    no rank sent a sketch (an older harness, a run without steps)."""
    if run is None or not run.ranks or any(r not in run.ranks for r in range(run.nproc)):
        return None
    rows = {r: step_rows(run.ranks[r]) for r in range(run.nproc)}
    if not all(rows.values()) or not any(row.get("gl") or row.get("pl") for rs in rows.values() for row in rs):
        return None
    n = min(len(rs) for rs in rows.values())
    counts: dict[str, int] = {}
    discarded: list[int] = []
    lost = None
    for i in range(n):
        got = step_verdict([rows[r][i] for r in range(run.nproc)],
                           [rows[r][i - 1] if i else None for r in range(run.nproc)])
        if got is None:
            continue
        counts[got] = counts.get(got, 0) + 1
        if got == "discarded":
            discarded.append(i + 1)
            if len(discarded) == 1:
                lost = _lost_rank([rows[r][i] for r in range(run.nproc)],
                                  [rows[r][i - 1] if i else None for r in range(run.nproc)])
    norms = {}
    for r, rs in rows.items():
        vals = [row.get("gn") for row in rs]
        vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
        if vals:
            norms[r] = statistics.median(vals)
    idle = None
    if len(norms) == run.nproc and max(norms.values()) > 0.0:
        top = max(norms.values())
        low = [r for r, v in norms.items() if v <= IDLE_NORM_RATIO ** 2 * top]  # squared norms
        idle = low[0] if low else None
    more_zeros = _more_zeros(rows, n)
    if idle is None and more_zeros:
        idle = more_zeros[0]
    return {"steps": sum(counts.values()), "verdicts": counts, "discarded": discarded[:16],
            "discarded_count": len(discarded), "lost_rank": lost, "idle": idle, "norms": {r: f"{v:.3g}" for r, v in norms.items()}}


def _more_zeros(rows: dict[int, list[dict]], n: int) -> list[int]:
    """Ranks with more all-zero gradient tensors than another rank at over half the steps where all ranks counted:
    with SyncBatchNorm a rank that backpropagated ``loss * 0`` still gets gradients in the layers before the last
    SyncBatchNorm (the other ranks' signal), but none in those after it."""
    counted, more = 0, {r: 0 for r in rows}
    for i in range(n):
        zs = [rows[r][i].get("gz") for r in rows]
        if not all(isinstance(z, int) and not isinstance(z, bool) for z in zs):
            continue
        counted += 1
        for r, z in zip(rows, zs):
            if z > min(zs):
                more[r] += 1
    return [r for r, k in more.items() if counted and k > counted / 2]


def discarded(verdict: dict[str, Any] | None) -> bool:
    """Were some ranks' contributions thrown away at more than ``DISCARDED_SHARE`` of the judged steps?"""
    if not verdict or not verdict["steps"]:
        return False
    k = verdict["discarded_count"]
    return k >= MIN_STEPS and k > DISCARDED_SHARE * verdict["steps"]


def synced_by_hand(verdict: dict[str, Any] | None) -> bool:
    """Did a collective the script wrote average the ranks' differing gradients or parameters at (nearly) every
    judged step? Whichever collective it was: reduce then broadcast, all_gather then a mean, all_reduce."""
    if not verdict or not verdict["steps"] or discarded(verdict):
        return False
    c = verdict["verdicts"]
    return c.get("mean", 0) + c.get("averaged", 0) >= 0.9 * verdict["steps"]
