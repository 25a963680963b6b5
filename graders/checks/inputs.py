"""What reached the model: the synthetic samples each rank's training forwards carried (issue 27, item 4).

The grader marks every synthetic image (``graders.cifar``); the harness reads the marks of each
training batch where it enters the model (``distgrade_harness.marks``) and sends them with each
optimizer step. That sees past the DataLoader: scripts that index tensors themselves, samplers
whose indices are not what the dataset returns. Pure functions over ``graders.torchrun`` runs.

* **Disjoint**, step by step: in one optimizer step every rank works on its own part of the
  same global batch, so what two ranks fed the model *in the same step* must not overlap
  (beyond a DistributedSampler's padding). Needs no epoch boundaries, so it also judges runs
  that cut epochs short or draw random batches.
* **Coverage and reshuffle** need epochs: a rank's first pass is its first run of samples
  with no repeat; coverage counts it against every sample the run trained on at all. Random draws with replacement repeat a sample after about sqrt(N) draws;
  such a run has no epochs, and those two checks are then not judged (no points lost).

Nothing here is used when too few samples could be read (another data set, a mix-up of two
images, a resize): that is "not observed", never a pass and never a failure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from graders.checks.records import step_rows

MIN_READ = 0.9  # share of the training samples whose marks were read, for the evidence to count
EPOCH_RUNS = 4  # a run of distinct samples this many times sqrt(N) long is a pass over the data, not chance


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


def read(run) -> Inputs | None:
    """The marks every rank read, or None when the run's data carried none or too few could be read."""
    size = (run.evidence.get("inputs") or {}).get("train_size")
    if not size:
        return None
    steps = {}
    for r in range(run.nproc):
        stream = run.ranks.get(r)
        rows = step_rows(stream) if stream is not None else []
        if not rows or any(row["seen"] is None for row in rows):
            return None
        got = sum(len(row["seen"]) for row in rows)
        if got == 0 or got < MIN_READ * (got + sum(row["unread"] or 0 for row in rows)):
            return None
        steps[r] = [[i for i in row["seen"] if i < size] for row in rows]  # test images are marked from the top
    if not all(any(s) for s in steps.values()):
        return None
    return Inputs(steps, int(size))


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


def missing(inputs: Inputs, epochs: dict[int, list[list[int]]]) -> dict | None:
    """Samples no rank fed the model in its first pass, out of every sample the run ever trained on
    (a script that holds some data out for validation is judged on the rest), if more than a dropped
    last batch per rank and a sampler's padding explain."""
    nproc = len(epochs)
    allowed = nproc * (inputs.batch - 1) + nproc - 1
    trained = inputs.trained()
    union = set().union(*(set(runs[0]) for runs in epochs.values()))
    lost = len(trained - union)
    if lost > allowed:
        return {"missing": lost, "size": len(trained), "epoch": 0, "seen": len(union), "allowed": allowed}
    return None


def same_order(epochs: dict[int, list[list[int]]]) -> dict | None:
    """A rank whose every later pass repeats its first pass in the same order (a second pass may be cut short)."""
    for r, runs in sorted(epochs.items()):
        whole = [run for run in runs[1:] if run]
        if whole and all(run == runs[0][:len(run)] for run in whole):
            return {"rank": r, "epochs": len(whole) + 1}
    return None
