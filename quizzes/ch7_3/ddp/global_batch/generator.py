"""global batch = per-card batch x cards."""


def generate(rng):
    b, n = rng.choice([4, 8, 16, 32, 64]), rng.choice([2, 4, 8])
    return {"params": {"per_card": b, "cards": n}, "answer": b * n, "accept": [str(b * n)], "reject": [str(b), str(b // n or 3)]}
