"""Work per rank: in data-parallel training every rank's model trains on its own 1/N of each step's
global batch.

Judged from the marks the harness read where each training batch entered the model (counted once
a backward followed), step by step, so neither the DataLoader's indices nor a process group's
word decide it: a rank 0 that trains on the gathered global batch while rank 1 feeds blank images
(its loss times 0, so DDP still all-reduces), or every rank training the whole gathered batch
beside a redundant all-reduce, both pass a sampler check and fail here. The launcher's CPU time
of each rank (``graders.evidence.host``, read from ``/proc``) is shown beside the counts.

Where no rank's marks could be read (another data set, a resize) there is nothing to judge here:
``graders.checks.inputs`` says what that means for the sampler checks.
"""
from __future__ import annotations

from typing import Any

from graders.checks.records import step_rows

# Of 1/N of the samples the ranks trained on together, step by step. A DistributedSampler gives every rank the
# same count (its padding included); random draws from each rank's own shard land within a few percent.
MIN_SHARE, MAX_SHARE = 0.8, 1.2


def uneven(run) -> dict[str, Any] | None:
    """The rank whose model trained on furthest from its 1/N share, if outside [MIN_SHARE, MAX_SHARE]; else None.

    Each step's share is 1/N of the distinct samples all ranks trained on in that step, plus every image
    whose mark could not be read (blurred, blank: work all the same, and it cannot be told apart); a
    rank's count is the distinct samples it trained on in each step, plus its unread images. Both sides
    count a sample once per step: random draws with replacement from a small shard repeat samples inside
    a step, and counting those repeats on one side only made an even split look uneven.
    """
    if run is None or run.nproc < 2:
        return None
    rows = {}
    for r in range(run.nproc):
        stream = run.ranks.get(r)
        rows[r] = step_rows(stream) if stream is not None else []
        if not rows[r] or any(not isinstance(row.get("seen"), list) for row in rows[r]):
            return None  # no marks on this host, or a rank without steps: judged elsewhere
    steps = min(len(v) for v in rows.values())
    def unread(r, k) -> int:
        n = rows[r][k].get("unread")
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0
    distinct = {r: [set(row["seen"]) for row in rows[r][:steps]] for r in rows}
    together = sum(len(set().union(*(distinct[r][k] for r in rows))) + sum(unread(r, k) for r in rows)
                   for k in range(steps))
    if not together:
        return None
    share = together / run.nproc
    counts = {r: sum(len(distinct[r][k]) + unread(r, k) for k in range(steps)) for r in rows}
    r, n = max(counts.items(), key=lambda item: abs(item[1] - share))
    ratio = n / share
    if MIN_SHARE <= ratio <= MAX_SHARE:
        return None
    cpu = ((getattr(run, "evidence", None) or {}).get("host") or {}).get("cpu_s") or {}
    return {"rank": r, "trained": n, "share": round(share), "ratio": round(ratio, 2), "steps": steps,
            "counts": {str(k): v for k, v in counts.items()},
            "cpu_s": {str(k): v for k, v in cpu.items() if isinstance(v, (int, float))}}
