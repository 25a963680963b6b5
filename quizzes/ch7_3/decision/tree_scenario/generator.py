"""A random (model size, card memory, card count, machines, LoRA allowed) scenario and its branch.

Sizes are in GB = 10^9 bytes. Every comparison the answer depends on is kept at least 10% away
from the card size (no "16.0 GB on a 16 GB card"), and the arithmetic is returned for the
feedback. ``3d`` is the answer only when no plan on one machine fits; "offload" only when
sharding on one machine is a little short (at most twice the card) and offloading the
optimizer states (12 of the 16 bytes) makes it fit.
"""
from functools import lru_cache

BRANCHES = ["ddp", "qlora", "fsdp", "offload", "3d"]
MARGIN = 0.10


def sizes(b, mem, cards, machines):
    n = b * 1e9
    return {"full": 16 * n / 1e9, "qlora": 0.7 * n / 1e9, "shard": 16 * n / cards / 1e9,
            "shard_offload": 4 * n / cards / 1e9, "shard_all": 16 * n / (cards * machines) / 1e9}


@lru_cache(maxsize=None)  # 1,728 possible draws; each worked out once per process
def decide(b, mem, cards, machines, lora):
    """The chapter's decision tree; None when a comparison is too close to call."""
    s = sizes(b, mem, cards, machines)
    checks = [s["full"] / mem, s["qlora"] / mem, s["shard"] / mem, s["shard"] / (2 * mem),
              s["shard_offload"] / mem, s["shard_all"] / mem]
    if any(abs(r - 1) < MARGIN for r in checks):
        return None
    if s["full"] < mem:
        return "ddp"
    if lora and s["qlora"] < mem:
        return "qlora"
    if s["shard"] < mem:
        return "fsdp"
    if s["shard"] < 2 * mem and s["shard_offload"] < mem:
        return "offload"
    if machines > 1 and s["shard_all"] < mem:
        return "3d"
    return None


def generate(rng):
    target = rng.choice(BRANCHES)
    for _ in range(5000):
        b = rng.choice([0.35, 0.5, 1, 3, 7, 13, 34, 70, 175])
        mem, cards = rng.choice([16, 24, 40, 80]), rng.choice([2, 4, 8])
        machines, lora = rng.choice([1, 1, 2, 4]), rng.random() < 0.5
        if target == "3d" and machines == 1:
            continue
        if decide(b, mem, cards, machines, lora) == target:
            break
    else:  # unreachable with these tables; keeps the loop bounded
        b, mem, cards, machines, lora, target = 0.5, 24, 2, 1, False, "ddp"
    s = sizes(b, mem, cards, machines)
    return {"params": {"billions": f"{b:g}", "mem": mem, "cards": cards, "machines": machines,
                       "all_cards": cards * machines,
                       "full_gb": f"{s['full']:.3g}", "qlora_gb": f"{s['qlora']:.3g}", "shard_gb": f"{s['shard']:.3g}",
                       "offload_gb": f"{s['shard_offload']:.3g}", "shard_all_gb": f"{s['shard_all']:.3g}",
                       "lora_zh": "任务允许用 LoRA/QLoRA" if lora else "任务要求全参训练（不允许 LoRA）",
                       "lora_en": "LoRA/QLoRA is allowed" if lora else "the task requires full-parameter training (no LoRA)"},
            "answer": target, "reject": [b for b in BRANCHES if b != target]}
