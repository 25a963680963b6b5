"""{billions}B parameters -> 16 bytes each (bf16 weights + grads, fp32 master, two Adam moments)."""
from coursework.memory_calc import GIB, full_training_bytes

SIZES = [0.5, 1, 1.5, 3, 7, 8, 13, 14, 32, 70]


def generate(rng):
    b = rng.choice(SIZES)
    n = b * 1e9
    total = full_training_bytes(n)
    gb, gib = total / 1e9, total / GIB
    return {"params": {"billions": f"{b:g}", "weights_only": 2 * n, "no_master": 12 * n},
            "answer": total,
            "accept": [f"{gb:g} GB", f"{gb:g}GB", f"{gib:.4g} GiB", f"{gb:g}", f"{total:.4e} B"],
            "reject": [f"{gib:.4g} GB", f"{gb:g} GiB", f"{2 * b:g} GB", f"{12 * b:g} GB", f"{gb * 2:g} GB"]}
