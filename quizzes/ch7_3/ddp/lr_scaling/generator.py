"""Linear learning-rate scaling with the global batch."""


def generate(rng):
    base, n, b = rng.choice([1e-4, 2e-4, 3e-4, 5e-4]), rng.choice([2, 4, 8]), rng.choice([8, 16, 32])
    lr = base * n
    return {"params": {"base_lr": f"{base:g}", "base": base, "cards": n, "per_card": b}, "answer": lr,
            "accept": [f"{lr:g}", f"{lr:.6f}"], "reject": [f"{base:g}", f"{base / n:g}"]}
