"""A random (model size, card memory, card count, machines, LoRA allowed) scenario and its branch."""
BRANCHES = ["ddp", "qlora", "fsdp", "offload", "3d"]


def decide(b, mem, cards, machines, lora):
    """The chapter's decision tree with model-state rules of thumb (bytes per parameter)."""
    n, m = b * 1e9, mem * 1e9
    if 16 * n <= m:
        return "ddp"
    if lora and 0.7 * n <= m:
        return "qlora"
    if machines > 1:
        return "3d"
    if 16 * n / cards <= m:
        return "fsdp"
    if 2 * n / cards <= m:
        return "offload"
    return None


def generate(rng):
    target = rng.choice(BRANCHES)
    for _ in range(5000):
        b = rng.choice([0.35, 0.5, 1, 3, 7, 13, 34, 70, 175])
        mem, cards = rng.choice([16, 24, 40, 80]), rng.choice([2, 4, 8])
        machines, lora = rng.choice([1, 1, 2, 4]), rng.random() < 0.5
        if target == "3d" and b < 34:
            continue
        if target != "3d" and machines > 1 and decide(b, mem, cards, machines, lora) != "ddp":
            continue
        if decide(b, mem, cards, machines, lora) == target:
            break
    else:  # unreachable with these tables; keeps the loop bounded
        b, mem, cards, machines, lora, target = 0.5, 24, 2, 1, False, "ddp"
    return {"params": {"billions": f"{b:g}", "mem": mem, "cards": cards, "machines": machines,
                       "lora_zh": "任务允许用 LoRA/QLoRA" if lora else "任务要求全参训练（不允许 LoRA）",
                       "lora_en": "LoRA/QLoRA is allowed" if lora else "the task requires full-parameter training (no LoRA)"},
            "answer": target, "reject": [b for b in BRANCHES if b != target]}
