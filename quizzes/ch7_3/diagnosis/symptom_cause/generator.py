"""One symptom drawn from a table; the answer is its cause (an option id)."""
SYMPTOMS = [('no_sampler', '双卡 DDP 的 loss 曲线和单卡一模一样，每个 epoch 一点没快，甚至略慢。', 'Two-card DDP: the loss curve matches the single-card run exactly and each epoch is no faster, even slightly slower.'), ('no_set_epoch', '用了 DistributedSampler，但每个 epoch 的样本顺序完全相同，验证指标很快停滞。', 'DistributedSampler is used, but every epoch shows the samples in exactly the same order and validation stalls early.'), ('no_rank0', '4 卡训练时日志每行打印 4 遍，checkpoint 文件偶尔损坏。', 'With four cards every log line appears four times and the checkpoint file is sometimes corrupt.'), ('lr_not_scaled', '从 1 卡换到 8 卡（每卡 batch 不变、学习率不变），收敛明显变慢。', 'Going from 1 to 8 cards (same per-card batch, same learning rate), convergence became clearly slower.'), ('bn_not_synced', 'CV 模型每卡 batch 只有 2，多卡训练后 BatchNorm 统计量抖动、精度下降。', 'A CV model with 2 images per card: after going multi-card, BatchNorm statistics are noisy and accuracy drops.'), ('nccl_network', '单机多卡训练跑了几分钟就卡住不动，日志最后是一串 NCCL INFO。', 'A single-machine multi-card run freezes after a few minutes; the log ends with a string of NCCL INFO lines.'), ('needs_sharding', '在 24GB 卡上全参训练 7B 模型，一启动就 OOM。', 'Full-parameter training of a 7B model on a 24 GB card runs out of memory at start-up.')]


def generate(rng):
    cause, zh, en = rng.choice(SYMPTOMS)
    return {"params": {"symptom_zh": zh, "symptom_en": en}, "answer": cause,
            "reject": [c for c, _, _ in SYMPTOMS if c != cause]}
