"""A scenario drawn from a table; FSDP inside PyTorch (it offloads to CPU too), DeepSpeed for NVMe offload or
multi-node pipelines."""
SCENARIOS = [('fsdp', '团队全用原生 PyTorch，单机 4 卡，想少装依赖把 3B 模型全参训起来。', 'A team on plain PyTorch, one machine with 4 cards, wants to full-train a 3B model with as few extra dependencies as possible.'), ('fsdp', '单机 8 卡，模型分片后放得下，不需要卸载，希望配置最省事并留在 PyTorch 生态。', 'One machine with 8 cards; the sharded model fits, no offload needed, and you want the simplest setup inside PyTorch.'), ('deepspeed', '租了双卡机器想全参训 13B，分片后显存仍不够，主机的 CPU 内存也不够，需要把状态卸载到 CPU 内存甚至 NVMe。', 'A rented two-card machine, full training of 13B; even sharded it does not fit and the host has too little CPU memory, so the states must be offloaded to CPU memory and even NVMe.'), ('deepspeed', '需要跨多台机器做流水线并行。', 'You need pipeline parallelism across several machines.')]


def generate(rng):
    answer, zh, en = rng.choice(SCENARIOS)
    return {"params": {"scenario_zh": zh, "scenario_en": en}, "answer": answer,
            "reject": ["deepspeed" if answer == "fsdp" else "fsdp"]}
