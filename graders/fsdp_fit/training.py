"""train.progress of homework 3, beyond a falling loss: what each rank's backward and inputs show.

The harness (``distgrade_harness.fsdp``) reads, per optimizer step of each rank, at the module that trained
(``fsdp_mem``): ``rows``, a short digest of each input row its forwards took (by content, whatever the
DataLoader's indices say); ``out_grad``, how much gradient the rank's backward sent into the module's outputs;
``grads_left``, whether the module's gradients were still set and not zero when the step's first backward began.
A falling loss on one rank's data shows none of these: a rank whose loss is scaled by 0, one batch stepped on
again and again, both ranks fed the same samples, ``zero_grad()`` forgotten. Readings are values of the harness's,
never the script's; a rank with no reading counts against the run.
"""
from __future__ import annotations

from coursework.report import CheckStatus
from graders.checks.ddp import Finding


MAX_ROWS = 64  # the harness digests at most this many rows per optimizer step (distgrade_harness.fsdp.MAX_ROWS)
SHARED_ROWS = 0.5  # of the rows two ranks fed the model in the same steps: beyond a sampler's padding and chance
REPEATED_ROWS = 0.5  # of a rank's rows that repeat earlier ones: the same batch stepped on again and again
IDLE_GRAD = 1e-3  # a rank whose backward sent less than this share of the busiest rank's gradient into the model
# A rank whose backward sent less than this share: its loss is weighted down (loss * 0.005 on rank 1), its data
# barely counts. Every rank of a correct run backpropagates the same loss over the same number of steps: where the
# model returns its loss the reading is that loss's gradient (1.0 a backward), so the ranks' totals are equal (1.0
# of the busiest in every correct and warn sample where it does; 0.998 where the script takes the cross-entropy of logits).
SCALED_GRAD = 0.25
SAME_DATA_FRACTION = 0.2  # of train.progress's points for ranks that trained on the same samples (a wasted card)
GRADS_LEFT_FRACTION = 1 / 3  # for gradients added onto the last step's (zero_grad forgotten)


def _mem_rows(run, rank: int) -> list[dict]:
    s = run.ranks.get(rank) if run else None
    return s.of("fsdp_mem") if s else []


def step_inputs(run, rank: int) -> list[list[str]] | None:
    """Per optimizer step of one rank, the digests of the input rows the trained module took (the harness reads
    them at the module's forward, ``fsdp_mem.rows``); None where a step has none: unread, which counts against."""
    out = []
    for m in _mem_rows(run, rank):
        rows = m.get("rows")
        if not isinstance(rows, list) or not rows or not all(isinstance(x, str) for x in rows):
            return None
        out.append(rows)
    return out or None


def same_inputs(run) -> dict | None:
    """The pair of ranks that fed the trained module the same rows in the same steps (each step's rows compared as
    sets, by content), where more than ``SHARED_ROWS`` of them and more than one row: no split of the data."""
    ranks = sorted(run.ranks)
    steps = {r: step_inputs(run, r) for r in ranks}
    for i, a in enumerate(ranks):
        for b in ranks[i + 1:]:
            if steps[a] is None or steps[b] is None:
                continue
            pairs = list(zip(steps[a], steps[b]))
            shared = sum(len(set(x) & set(y)) for x, y in pairs)
            of = sum(min(len(x), len(y)) for x, y in pairs)
            if shared > 1 and shared > SHARED_ROWS * of:
                return {"a": a, "b": b, "shared": shared, "of": of, "steps": len(pairs)}
    return None


def unsplit_inputs(run, epoch_rows: int | None) -> dict | None:
    """The pair of ranks that fed the trained module some of the same samples within the first epoch, in any steps.

    The grader's data set holds ``epoch_rows`` samples per rank (one epoch of the graded run): a DistributedSampler
    hands each sample to one rank only in an epoch (the set divides evenly: no padding repeats one), and the next
    epoch reshuffles, so only each rank's first ``epoch_rows`` rows are compared. Ranks that each
    shuffle the whole set (no sampler, or a sampler seeded by the rank) share about half of them. A step whose rows
    the harness cut at ``MAX_ROWS`` ends the window (the rows after it may be the next epoch's)."""
    if not epoch_rows:
        return None
    ranks = sorted(run.ranks)
    window, padded = {}, False
    for r in ranks:
        rows = []
        for step in step_inputs(run, r) or []:
            rows += step
            if len(step) >= MAX_ROWS:
                break
        handed, pads = first_epoch(run, r)
        padded = padded or pads
        window[r] = rows[:min(epoch_rows, handed) if handed else epoch_rows]
    allowed = run.nproc - 1 if padded else 0  # a DistributedSampler pads a set N does not divide with N-1 repeats
    for i, a in enumerate(ranks):
        for b in ranks[i + 1:]:
            shared = len(set(window[a]) & set(window[b]))
            if shared > allowed:  # the set is samples of distinct content: beyond padding, no chance meeting
                return {"a": a, "b": b, "shared": shared, "of": min(len(window[a]), len(window[b])),
                        "epoch": epoch_rows}
    return None


def first_epoch(run, rank: int) -> tuple[int | None, bool]:
    """From the harness's records of the rank's DataLoader epochs (``distgrade_harness.hooks``): how many samples
    its training loader (the one that handed out the most batches) gave in its first whole epoch, and whether the
    data set that loader read is one the ranks do not divide (a validation share held back: a DistributedSampler
    pads it). ``(None, False)`` without such a record. Used only to end the compared window where the rank's own
    epoch ends (the next one reshuffles) and to allow the padding: a script that shortens its epochs trains on
    less, which the other checks see."""
    s = run.ranks.get(rank) if run else None
    recs = [e for e in (s.of("epoch") if s else []) if isinstance(e, dict) and e.get("kind") == "map"]
    totals: dict = {}
    for e in recs:
        n = e.get("batches")
        totals[str(e.get("loader"))] = totals.get(str(e.get("loader")), 0) + (n if _whole(n) else 0)
    if not totals:
        return None, False
    main = max(totals, key=totals.get)
    mine = [e for e in recs if str(e.get("loader")) == main]
    size = next((x for x in (mine[0].get("local_len"), mine[0].get("dataset_len")) if _whole(x)), None)
    padded = bool(size) and size % max(run.nproc, 1) != 0
    done = next((e for e in mine if e.get("complete") is True and isinstance(e.get("indices"), list)), None)
    handed = len(done["indices"]) if done is not None and done["indices"] else None
    return handed, padded


def _whole(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def repeated_inputs(run, epoch_rows: int | None = None) -> dict | None:
    """A rank whose rows come back step after step (one batch memorised): at most half of them distinct, or of an
    epoch's worth of them where the run is longer than the grader's data set (a sampler's next epoch repeats)."""
    for r in sorted(run.ranks):
        steps = step_inputs(run, r)
        rows = [x for s in steps or [] for x in s]
        seen = min(len(rows), epoch_rows) if epoch_rows else len(rows)
        if len(steps or []) >= 2 and len(rows) >= 4 and len(set(rows)) <= REPEATED_ROWS * seen:
            return {"rank": r, "distinct": len(set(rows)), "rows": len(rows), "steps": len(steps)}
    return None


def idle_rank(run, share: float = IDLE_GRAD) -> dict | None:
    """A rank whose backward sent (next to) no gradient into the trained module over the whole run (its loss
    scaled by 0): the reduce-scatter averages the other ranks' gradients with zeros. A rank with no reading at all
    (no backward through the module's output seen) counts as idle: missing evidence is no contribution shown.
    With ``share`` = ``SCALED_GRAD``: a rank whose loss is weighted down so far that its data barely counts."""
    totals = {}
    for r in sorted(run.ranks):
        vals = [m.get("out_grad") for m in _mem_rows(run, r)]
        vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]
        totals[r] = sum(vals) if vals else 0.0
    busiest = max(totals.values(), default=0.0)
    for r, total in totals.items():
        if busiest > 0 and total <= share * busiest:
            return {"rank": r, "grad": f"{total:.3g}", "busiest": f"{busiest:.3g}", "share": f"{total / busiest:.2g}"}
    return None


def grads_piled(run) -> dict | None:
    """A rank whose trained module still held non-zero gradients when the first backward after an optimizer step
    began, in most steps: each step adds its gradient onto all the earlier ones (``zero_grad()`` forgotten)."""
    for r in sorted(run.ranks):
        left = [m.get("grads_left") for m in _mem_rows(run, r)[1:]]
        piled = sum(1 for x in left if x is True)
        if left and piled > len(left) / 2:
            return {"rank": r, "piled": piled, "steps": len(left)}
    return None


def training_logic(run, params: dict, ev: dict, epoch_rows: int | None = None) -> Finding | None:
    """What the falling loss does not show: a rank that trained on nothing (its loss scaled by 0), one batch
    stepped on again and again, every rank fed the same samples (in the same steps, or anywhere in the first epoch:
    ``epoch_rows`` is the samples one rank takes in an epoch of the grader's data set), gradients piled up."""
    found = idle_rank(run)
    if found:
        return Finding(CheckStatus.FAIL, "idle_rank", {**params, **found}, {**ev, "idle_rank": found})
    found = idle_rank(run, SCALED_GRAD)
    if found:
        return Finding(CheckStatus.FAIL, "rank_scaled", {**params, **found}, {**ev, "rank_scaled": found})
    found = repeated_inputs(run, epoch_rows)
    if found:
        return Finding(CheckStatus.FAIL, "one_batch", {**params, **found}, {**ev, "repeated": found})
    if any(step_inputs(run, r) is None for r in run.ranks):
        unread = next(r for r in sorted(run.ranks) if step_inputs(run, r) is None)
        return Finding(CheckStatus.WARN, "inputs_unread", {**params, "rank": unread}, {**ev, "inputs_unread": unread},
                       fraction=SAME_DATA_FRACTION)
    found = same_inputs(run)
    if found:
        return Finding(CheckStatus.WARN, "same_inputs", {**params, **found}, {**ev, "same_inputs": found},
                       fraction=SAME_DATA_FRACTION)
    found = unsplit_inputs(run, epoch_rows)
    if found:
        return Finding(CheckStatus.WARN, "not_split", {**params, **found}, {**ev, "not_split": found},
                       fraction=SAME_DATA_FRACTION)
    found = grads_piled(run)
    if found:
        return Finding(CheckStatus.WARN, "grads_piled", {**params, **found}, {**ev, "grads_piled": found},
                       fraction=GRADS_LEFT_FRACTION)
    return None
