"""Lowest ZeRO stage whose per-card model states fit, from the shared calculator.

Sizes in GB = 10^9 bytes; every stage's per-card figure is kept at least 10% away from the card
size, so no answer hangs on rounding ("16.0 GB on a 16 GB card").
"""
from functools import lru_cache

from coursework.memory_calc import TrainingSetup, estimate

IDS = ["s0", "s1", "s2", "s3", "none"]
MARGIN = 0.10


@lru_cache(maxsize=None)
def stage_gbs(b, n):
    """Per-card GB of stages 0-3 (28 model/card pairs: worked out once per process, not per draw)."""
    return tuple(estimate(TrainingSetup(params=b * 1e9, cards=n, stage=s)).total_gb for s in range(4))


def generate(rng):
    target = rng.choice(IDS)
    for _ in range(5000):
        b, n, mem = rng.choice([0.5, 1, 3, 7, 13, 30, 70]), rng.choice([2, 4, 8, 16]), rng.choice([16, 24, 40, 80])
        gbs = stage_gbs(b, n)
        if any(abs(g / mem - 1) < MARGIN for g in gbs):
            continue
        fit = next((IDS[s] for s, g in enumerate(gbs) if g < mem), "none")
        if fit == target:
            break
    params = {"billions": f"{b:g}", "cards": n, "mem": mem}
    params.update({f"g{s}": f"{g:.3g}" for s, g in enumerate(gbs)})
    return {"params": params, "answer": fit, "reject": [i for i in IDS if i != fit]}
