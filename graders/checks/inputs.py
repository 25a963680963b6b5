"""What reached the model: the synthetic samples each rank's training forwards carried.

The grader marks every synthetic image (``graders.cifar``); the harness reads the marks of each
training batch where it enters the model (``distgrade_harness.marks``) and sends them with each
optimizer step. That sees past the DataLoader: scripts that index tensors themselves, samplers
whose indices are not what the dataset returns. Pure functions over ``graders.torchrun`` runs.

* **Disjoint**, step by step: in one optimizer step every rank works on its own part of the
  same global batch, so what two ranks fed the model *in the same step* must not overlap
  (beyond a DistributedSampler's padding). Needs no epoch boundaries, so it also judges runs
  that cut epochs short or draw random batches. And over each pass through the data
  (``epoch_overlap``): batches staggered by rank (``(k + rank) % n_batches``) never meet in the
  same step, yet every rank walks the whole data set every epoch.
* **Coverage** counts every sample that ever reached the model against the training files
  (``subset``): a held-back validation share is allowed, a "debug subset" is not. With epochs (a
  rank's first pass is its first run of samples with no repeat) no sample of the run may be missing
  from the first pass (``missing``). Random draws with replacement repeat a sample after about
  sqrt(N) draws and have no epochs: the share they reach is compared with what the grader's number
  of epochs of uniform draws reaches.
* **Reshuffle** with epochs: a later pass that repeats the first in order; with random draws, a
  whole batch that comes back (drawn again from the same seed).

Too few samples read on a rank of a run on the grader's synthetic data (blank, resized or mixed
images, inputs fed to the model in another form) is ``shortfall``: missing evidence, which counts
against the run (the checks say so and earn nothing), never the DataLoader's word alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from graders.checks.records import step_rows

MIN_READ = 0.9  # share of the training samples whose marks were read, for the evidence to count
EPOCH_RUNS = 4  # a run of distinct samples this many times sqrt(N) long is a pass over the data, not chance
# Of a pass, the samples two ranks may share: a pass runs on into the next epoch until a sample comes back, by
# chance for as long as the next epoch's samples are the other ranks' ((N-1)/N each). Ranks that each walk the
# whole data set share nearly all of it.
EPOCH_DRIFT = 0.25
MIN_SHARE = 0.75  # of the training files a run must feed the model (a validation split may hold back the rest)
WHOLE_WALK = 0.9  # of the samples a run trained on, the share one rank's first that-many samples reach: the whole set


@dataclass
class Inputs:
    """Per rank, per optimizer step, the training samples that entered the model."""

    steps: dict[int, list[list[int]]]
    train_size: int

    @property
    def batch(self) -> int:
        return max((len(s) for rows in self.steps.values() for s in rows), default=0)

    def sequence(self, rank: int) -> list[int]:
        return [i for s in self.steps[rank] for i in s]

    def trained(self) -> set[int]:
        """Every sample any rank trained on."""
        return set().union(*(set(self.sequence(r)) for r in self.steps))


def _train_size(run) -> int | None:
    size = (run.evidence.get("inputs") or {}).get("train_size")
    return int(size) if size else None


def _rank_rows(run, r: int) -> list[dict]:
    stream = run.ranks.get(r)
    return step_rows(stream) if stream is not None else []


def _reading(rows: list[dict], size: int) -> dict:
    """What one rank's marks say: training samples read, images unreadable, steps."""
    got = sum(1 for row in rows for i in (row["seen"] or []) if i < size)  # test images are marked from the top
    unread = sum(row["unread"] or 0 for row in rows)
    return {"read": got, "unread": unread, "steps": len(rows),
            "enough": got > 0 and got >= MIN_READ * (got + unread)}


def read(run) -> Inputs | None:
    """The marks every rank read, or None when the run's data carried none or too few could be read
    (``shortfall`` says which of the two)."""
    size = _train_size(run)
    if not size:
        return None
    steps = {}
    for r in range(run.nproc):
        rows = _rank_rows(run, r)
        if not rows or any(row["seen"] is None for row in rows) or not _reading(rows, size)["enough"]:
            return None
        steps[r] = [[i for i in row["seen"] if i < size] for row in rows]
    return Inputs(steps, size)


def shortfall(run) -> dict | None:
    """On the grader's synthetic data, the first rank that trained but whose marks could not be read
    enough to tell which samples reached its model: {rank, read, unread, steps}. None where the data
    carries no marks (the real CIFAR-10), or every rank that stepped was read."""
    size = _train_size(run)
    if not size:
        return None
    rows = {r: _rank_rows(run, r) for r in range(run.nproc)}
    if not any(rows.values()) or any(row["seen"] is None for rs in rows.values() for row in rs):
        return None  # no step anywhere (judged elsewhere), or a harness that does not read marks
    for r, rs in rows.items():
        reading = _reading(rs, size)
        if not reading["enough"]:  # a rank with no step at all is read as nothing
            return {"rank": r, **{k: reading[k] for k in ("read", "unread", "steps")}}
    return None


def overlap(inputs: Inputs) -> dict | None:
    """The pair of ranks that fed the model the most shared samples in the same steps, if beyond padding."""
    nproc = len(inputs.steps)
    per_rank = max(len(inputs.sequence(r)) for r in inputs.steps)
    passes = max(1, math.ceil(per_rank / max(1, math.ceil(inputs.train_size / nproc))))
    allowed = (nproc - 1) * passes  # DistributedSampler repeats up to N-1 samples per epoch
    worst = None
    for a in range(nproc):
        for b in range(a + 1, nproc):
            rows = list(zip(inputs.steps[a], inputs.steps[b]))
            shared = sum(len(set(x) & set(y)) for x, y in rows)
            of = sum(min(len(x), len(y)) for x, y in rows)
            if shared > allowed and (worst is None or shared > worst["shared"]):
                worst = {"a": a, "b": b, "shared": shared, "of": of, "steps": len(rows)}
    return worst


def _whole_steps(rows: list[list[int]], runs: list[list[int]]) -> list[set[int]]:
    """Per pass, the samples of the steps that lie wholly inside it, less the last such step.

    A pass (a run with no repeat) is an epoch plus the first samples of the next epoch up to one the
    rank trained on before (about one in N with N ranks, so about N-1 spill over on average); those
    sit in a step that straddles the pass's end and is left out. The last whole step is left out too:
    it is the next epoch's first batch where more than a batch went by before a repeat."""
    ends, total = [], 0
    for run in runs:
        total += len(run)
        ends.append(total)
    out: list[list[int]] = [[] for _ in runs]
    start, k = 0, 0
    for row in rows:
        stop = start + len(row)
        while k < len(ends) and start >= ends[k]:
            k += 1
        if k < len(ends) and stop <= ends[k] and row:
            out[k].append(row)
        start = stop
    return [set().union(*(set(s) for s in steps[:-1])) for steps in out]


def epoch_overlap(inputs: Inputs) -> dict | None:
    """The pair of ranks that trained on the most shared samples within one pass through the data, if
    beyond a sampler's padding and one batch: each rank must train on its own 1/N of every epoch, not
    merely on batches that differ from the other ranks' in the same step. None for random draws (no
    epochs: judged step by step only)."""
    epochs = passes(inputs)
    if epochs is None:
        return None
    nproc = len(epochs)
    whole = {r: _whole_steps(inputs.steps[r], epochs[r]) for r in epochs}
    worst = None
    for k in range(min(len(w) for w in whole.values())):
        for a in range(nproc):
            for b in range(a + 1, nproc):
                sa, sb = whole[a][k], whole[b][k]
                shared = len(sa & sb)
                allowed = max(nproc - 1 + inputs.batch, math.ceil(EPOCH_DRIFT * min(len(sa), len(sb))))
                if shared > allowed and (worst is None or shared > worst["shared"]):
                    worst = {"a": a, "b": b, "shared": shared, "of": min(len(sa), len(sb)), "epoch": k,
                             "allowed": allowed}
    return worst


def whole_walks(inputs: Inputs) -> dict | None:
    """Two ranks that each walked (nearly) the whole data set within their first n samples, n being every sample
    the run trained on: ``WHOLE_WALK`` of them or more. Read whatever the passes say, so a repeat planted early
    (the marks then read as random draws, whose passes are not compared) does not hide it. A rank that takes its
    1/N of each epoch reaches far less in n samples (1 - (1 - 1/N)^N: 75% for 2 ranks over two reshuffled
    epochs, less for more ranks), and so do uniform random draws (63%). Measured on 12 homework-1 samples with
    unusual samplers (random draws from a rank's shard, a permutation strided by rank, no DataLoader, a held-back
    validation share, no set_epoch): 0.47 to 0.75; the rotated whole set: 1.0."""
    size = len(inputs.trained())
    if size < 2 or len(inputs.steps) < 2:
        return None
    walked = {}
    for r in sorted(inputs.steps):
        first = set(inputs.sequence(r)[:size])
        if len(first) >= WHOLE_WALK * size:
            walked[r] = first
    if len(walked) < 2:
        return None
    a, b = sorted(walked)[:2]
    return {"a": a, "b": b, "shared": len(walked[a] & walked[b]), "of": min(len(walked[a]), len(walked[b])),
            "epoch": 0, "allowed": 0}


def passes(inputs: Inputs) -> dict[int, list[list[int]]] | None:
    """Each rank's passes over the data: runs of samples with no repeat. None for random draws."""
    least = EPOCH_RUNS * math.sqrt(inputs.train_size)
    out = {}
    for r in inputs.steps:
        runs, current, inside = [], [], set()
        for i in inputs.sequence(r):
            if i in inside:
                runs.append(current)
                current, inside = [], set()
            current.append(i)
            inside.add(i)
        runs.append(current)
        if len(runs[0]) < least:
            return None
        out[r] = runs
    return out


def missing(inputs: Inputs, epochs: dict[int, list[list[int]]], of: set[int] | None = None) -> dict | None:
    """Samples no rank fed the model in its first pass, out of every sample the run ever trained on
    (a script that holds some data out for validation is judged on the rest; ``of``: that set, where
    ``inputs`` holds only some of the ranks), if more than a dropped last batch per rank and a sampler's
    padding explain."""
    nproc = len(epochs)
    allowed = nproc * (inputs.batch - 1) + nproc - 1
    trained = inputs.trained() if of is None else of
    union = set().union(*(set(runs[0]) for runs in epochs.values()))
    lost = len(trained - union)
    if lost > allowed:
        return {"missing": lost, "size": len(trained), "epoch": 0, "seen": len(union), "allowed": allowed}
    return None


def subset(inputs: Inputs, epochs: float | None) -> dict | None:
    """The samples that ever reached the model, if fewer than ``MIN_SHARE`` of what the run should reach:
    the whole training set with epochs; with random draws (``epochs``: how many epochs of draws the grader
    asked for, None where unknown) the share that many uniform draws reach, 1 - exp(-epochs)."""
    seen = len(inputs.trained())
    if passes(inputs) is None:
        draws = epochs if epochs else sum(len(inputs.sequence(r)) for r in inputs.steps) / inputs.train_size
        reach = 1 - math.exp(-draws)
    else:
        reach = 1.0
    least = MIN_SHARE * reach
    if seen < least * inputs.train_size:
        return {"seen": seen, "size": inputs.train_size, "share": f"{100 * seen / inputs.train_size:.0f}%",
                "least": f"{100 * least:.0f}%"}
    return None


def repeated_batches(inputs: Inputs) -> dict | None:
    """With random draws: a rank whose whole batch (the same samples in the same order) comes back, as
    draws from a generator seeded again every epoch do; by chance that does not happen."""
    for r, rows in sorted(inputs.steps.items()):
        counts: dict[tuple, int] = {}
        for batch in rows:
            if len(batch) >= 2:
                counts[tuple(batch)] = counts.get(tuple(batch), 0) + 1
        most = max(counts.values(), default=0)
        if most > 1:
            return {"rank": r, "epochs": most}
    return None


def same_order(epochs: dict[int, list[list[int]]]) -> dict | None:
    """A rank whose every later pass repeats its first pass in the same order (a second pass may be cut short)."""
    for r, runs in sorted(epochs.items()):
        whole = [run for run in runs[1:] if run]
        if whole and all(run == runs[0][:len(run)] for run in whole):
            return {"rank": r, "epochs": len(whole) + 1}
    return None
