"""Per-card model states for ZeRO stage k on n cards, from the shared calculator."""
from graders.memory_calc import TrainingSetup, estimate

SIZES = [1, 3, 7, 13, 30, 70]
CARDS = [2, 4, 8, 16, 64]


def generate(rng):
    b, n, stage = rng.choice(SIZES), rng.choice(CARDS), rng.randint(0, 3)
    est = estimate(TrainingSetup(params=b * 1e9, cards=n, stage=stage))
    total, full = est.total_bytes, 16 * b * 1e9
    reject = [f"{total / 2 ** 30:.4g} GB"]
    if stage:
        reject.append(f"{full / 1e9:g} GB")
    else:
        reject.append(f"{full / n / 1e9:.4g} GB")
    return {"params": {"billions": f"{b:g}", "cards": n, "stage": stage, "unsharded": full if stage else -1,
                       "formula_zh": est.formula["zh"], "formula_en": est.formula["en"]},
            "answer": total, "accept": [f"{total / 1e9:.4g} GB", f"{total / 2 ** 30:.4g} GiB"], "reject": reject}
