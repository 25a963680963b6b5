"""What a report's evidence keys and enumerated values are called, in both languages.

Graders write evidence as JSON with their own keys (``idle_1``, ``ratio_n``, ``verdict``); a page
never shows such a key. Every key a grader in this repository writes is in ``LABELS`` (the test
``tests/server/homework/test_evidence_labels.py`` walks the graders' source to keep it so); a key
added later without a label still reads as words, marked as a name (``generic_label``).
Data only, no Flask: ``readable`` builds the items from it.
"""
from __future__ import annotations

import re

# key -> (zh, en, kind); kinds: bytes, s, sps (samples/s), x (ratio), pct (0..1), when, plain,
# id (an identifier shown as code: a concept or API name that has no translation), quote (what the
# student wrote, shown as written), verdict and source (enumerated values named in VALUES)
LABELS: dict[str, tuple[str, str, str]] = {
    "exit_codes": ("各 rank 的退出码", "Exit code per rank", "plain"),
    "returncode": ("退出码", "Exit code", "plain"),
    "timed_out": ("超时", "Timed out", "plain"),
    "wall_s": ("运行时间", "Wall time", "s"),
    "speedup": ("加速比", "Speed-up", "x"),
    "raw": ("实测加速比", "Measured speed-up", "x"),
    "normalised": ("相对参考解的加速比（上限 1）", "Speed-up relative to the reference (capped at 1)", "x"),
    "normalised_uncapped": ("相对参考解的加速比", "Speed-up relative to the reference", "x"),
    "threshold": ("及格线", "Threshold", "x"),
    "throughput_1": ("1 个进程的吞吐", "Throughput, 1 process", "sps"),
    "throughput_n": ("多进程的吞吐", "Throughput, all processes", "sps"),
    "loop_1": ("1 个进程的循环吞吐", "Loop throughput, 1 process", "sps"),
    "loop_n": ("多进程的循环吞吐", "Loop throughput, all processes", "sps"),
    "idle_1": ("1 个进程时主线程空闲的比例", "Share of time the 1-process run sat idle", "pct"),
    "reference": ("参考解", "Reference solution", "x"),  # a number: the reference's speed-up
    "ref_t1": ("参考解 1 个进程的吞吐", "Reference throughput, 1 process", "sps"),
    "ref_tn": ("参考解多进程的吞吐", "Reference throughput, all processes", "sps"),
    "ratio_1": ("1 个进程：你的吞吐 ÷ 参考解", "1 process: your throughput ÷ the reference's", "x"),
    "ratio_n": ("多进程：你的吞吐 ÷ 参考解", "All processes: your throughput ÷ the reference's", "x"),
    "reference_at": ("参考解的测量时间", "Reference measured at", "when"),
    "load_dependent": ("结果受主机负载影响", "Depends on the host's load", "plain"),
    "not_graded_here": ("本机不评此项", "Not graded on this host", "plain"),
    "unique_fraction": ("不重复样本比例", "Share of distinct samples", "pct"),
    "expected_gpu": ("章节中 GPU 上的预期", "Chapter's expectation on GPUs", "plain"),
    "epochs": ("轮数", "Epochs", "plain"),
    "epoch": ("轮", "Epoch", "plain"),
    "epochs_checked": ("检查的轮数", "Epochs checked", "plain"),
    "steps": ("步数", "Steps", "plain"),
    "saves": ("保存次数", "Saves", "plain"),
    "full_saves": ("完整保存（字节）", "Full saves (bytes)", "bytes"),
    "prints": ("打印次数", "Prints", "plain"),
    "logging": ("日志记录次数", "Log records", "plain"),
    "batchnorm": ("BatchNorm 层", "BatchNorm layers", "plain"),
    "syncbatchnorm": ("SyncBatchNorm 层", "SyncBatchNorm layers", "plain"),
    "micro_batches_per_step": ("每步的微批次", "Micro-batches per step", "plain"),
    "synced_per_step": ("每步同步次数", "Gradient syncs per step", "plain"),
    "sync": ("梯度同步方式", "How gradients are synchronised", "id"),
    "max_rel_diff": ("参数最大相对差", "Largest relative parameter difference", "plain"),
    "peak": ("峰值显存", "Peak memory", "bytes"),
    "capacity": ("卡的容量", "Card capacity", "bytes"),
    "local_param_bytes": ("本 rank 的参数", "Parameters on this rank", "bytes"),
    "global_param_bytes": ("全部参数", "All parameters", "bytes"),
    "per_rank_batch": ("每个 rank 的 batch", "Batch per rank", "plain"),
    "global_batch": ("总 batch", "Global batch", "plain"),
    "lr_1": ("1 个进程的学习率", "Learning rate, 1 process", "plain"),
    "lr_n": ("多进程的学习率", "Learning rate, all processes", "plain"),
    "nproc": ("进程数", "Processes", "plain"),
    "allowed": ("允许", "Allowed", "plain"),
    "allowed_missing": ("允许缺少的样本数", "Samples allowed to be missing", "plain"),
    "overlap": ("重叠的样本数", "Overlapping samples", "plain"),
    "shared": ("两个 rank 共有的样本数", "Samples two ranks share", "plain"),
    "missing": ("缺少", "Missing", "plain"),
    "dataset_len": ("数据集大小", "Data set size", "plain"),
    "size": ("大小", "Size", "plain"),
    "first_loss": ("开始时的损失", "Loss at the start", "plain"),
    "last_loss": ("结束时的损失", "Loss at the end", "plain"),
    "process_group": ("进程组", "Process group", "id"),
    "sampler": ("采样器", "Sampler", "id"),
    "optimizer": ("优化器", "Optimizer", "plain"),
    "model_source": ("模型来源", "Where the model came from", "id"),
    "wrapping": ("FSDP 包装", "FSDP wrapping", "plain"),
    "api": ("接口", "API", "id"),
    "units": ("分片单元数", "Sharded units", "plain"),
    "largest_fraction": ("最大单元占比", "Largest unit's share", "pct"),
    "strategy": ("分片策略", "Sharding strategy", "id"),
    "strategies": ("分片策略", "Sharding strategies", "id"),
    "end": ("训练结束时", "At the end of training", "plain"),
    "oom": ("显存不足", "Out of memory", "plain"),
    "kernel_error": ("内核错误", "Kernel error", "plain"),
    "exception": ("异常", "Exception", "plain"),
    "exc_type": ("异常类型", "Exception type", "id"),
    "message": ("信息", "Message", "plain"),
    "line": ("行号", "Line", "plain"),
    "code": ("代码", "Code", "id"),
    "step": ("步", "Step", "plain"),
    "stuck": ("卡住的位置", "Stuck in", "plain"),
    "tampering": ("篡改迹象", "Signs of tampering", "plain"),
    "rank": ("rank", "Rank", "plain"),
    "exit_code": ("退出码", "Exit code", "plain"),
    "manual_cells": ("老师批改的单元格", "Cells the teacher grades", "plain"),
    "cell_id": ("单元格", "Cell", "id"),
    "max_points": ("满分", "Maximum points", "plain"),
    "manual_score": ("老师的评分", "Teacher's score", "plain"),
    "static_points": ("静态检查的得分", "Points from the static check", "plain"),
    # homework 2: one annotated field
    "value": ("字段的值", "Value", "id"),
    "annotation": ("你的注释", "Your annotation", "quote"),
    "verdict": ("判定", "Verdict", "verdict"),
    "wrong": ("说错的", "Wrong", "plain"),
    "findings": ("发现的问题", "Problems found", "plain"),
    "path": ("字段", "Field", "id"),
    "severity": ("严重程度", "Severity", "plain"),
    "dialect": ("配置类型", "Kind of config", "id"),
    "format": ("文件格式", "File format", "id"),
    "keys": ("顶层字段", "Top-level fields", "id"),
    "provisional_points": ("暂定得分", "Provisional points", "plain"),
    # homework 2: the memory estimate of a config (coursework.memory_calc.MemoryEstimate.to_dict)
    "setup": ("训练设置", "Training set-up", "plain"),
    "params": ("参数", "Parameters", "plain"),
    "cards": ("卡数", "Cards", "plain"),
    "precision": ("精度", "Precision", "id"),
    "stage": ("ZeRO 级别", "ZeRO stage", "plain"),
    "offload_optimizer": ("优化器状态卸载", "Optimizer state offloaded", "plain"),
    "offload_params": ("参数卸载", "Parameters offloaded", "plain"),
    "per_param": ("每个参数的字节数", "Bytes per parameter", "plain"),
    "grads": ("梯度", "Gradients", "plain"),
    "params_bytes": ("每卡参数", "Parameters per card", "bytes"),
    "grads_bytes": ("每卡梯度", "Gradients per card", "bytes"),
    "optimizer_bytes": ("每卡优化器状态", "Optimizer state per card", "bytes"),
    "total_bytes": ("每卡合计", "Total per card", "bytes"),
    "cpu_bytes": ("放在 CPU 内存的", "Kept in CPU memory", "bytes"),
    "formula": ("公式", "Formula", "plain"),
    # what staff see besides (STAFF_ONLY below)
    "band": ("速度档", "Speed band", "id"),
    "key": ("消息键", "Message key", "id"),
    "digests": ("各 rank 的数据摘要", "Data digests per rank", "id"),
    "digest": ("摘要", "Digest", "id"),
    "sha256": ("SHA-256", "SHA-256", "id"),
    "solution": ("参考解版本", "Reference solution version", "id"),
    "host": ("主机", "Host", "id"),
    "traceback": ("调用栈", "Traceback", "id"),
    "calibration": ("校准", "Calibration", "plain"),
    "measured_at": ("测量时间", "Measured at", "when"),
    "pairs": ("配对测量", "Paired measurements", "plain"),
    "spread": ("离散程度", "Spread", "plain"),
    "nbgrader_log_tail": ("nbgrader 日志末尾", "End of the nbgrader log", "id"),
    "concept": ("概念", "Concept", "id"),
    "other_concept": ("说到的另一个概念", "The other concept it names", "id"),
    "confidence": ("判读的把握", "Confidence of the reading", "pct"),
    "needs_review": ("需要老师复核", "Needs a teacher", "plain"),
    "review": ("复核", "Review", "id"),
    "review_points": ("复核可加的分", "Points a review may add", "plain"),
    "total_gb": ("每卡合计（GB）", "Total per card (GB)", "plain"),
    # the speed check, before the reference is applied
    "idle_1_raw": ("1 个进程时主线程空闲的比例（实测）", "Share of time the 1-process run sat idle (measured)", "pct"),
    "min_reference_speedup": ("参考解至少要达到的加速比", "Speed-up the reference must reach", "x"),
    "stopped": ("评分程序提前结束运行的原因", "Why the grader ended the run early", "plain"),
    # outside evidence (graders.evidence): what the grader measured itself, and what a result rests on
    "outside": ("评分程序在脚本之外测得的证据", "Evidence the grader measured outside the script", "plain"),
    "source": ("证据来源", "Where the evidence comes from", "source"),
    "rests_on": ("判定依据", "What this result rests on", "plain"),
    "model": ("评分程序对模型的评估", "The grader's own evaluation of the model", "plain"),
    "loopback": ("本机回环网络流量", "Loopback traffic on the host", "plain"),
    "compared_steps": ("训练中比对参数的步", "Steps at which the parameters were compared", "plain"),
    "differ_at_step": ("参数开始不一致的步", "Step at which the parameters first differed", "plain"),
    "gathered_full_on": ("收集过完整模型的 rank", "Ranks that gathered the full model", "plain"),
}

# Keys that mean nothing to a student (internals of the reading or the calibration); staff see them.
STAFF_ONLY = {"band", "key", "digests", "digest", "sha256", "solution", "host", "traceback", "calibration",
              "measured_at", "pairs", "spread", "nbgrader_log_tail", "concept", "other_concept", "confidence",
              "needs_review", "review", "review_points", "total_gb", "load_dependent", "reference_at"}
STAFF_PATTERN = re.compile(r"(hash|digest|sha\d*|token|_id$)", re.I)

# Enumerated values a grader writes, by kind.
VALUES: dict[str, dict[str, tuple[str, str]]] = {
    "verdict": {"missing": ("没有注释", "no annotation"), "correct": ("正确", "correct"),
                "partial": ("部分正确", "partly correct"), "contradiction": ("自相矛盾", "contradicts itself"),
                "wrong_concept": ("说的是另一个概念", "about a different concept"),
                "unrelated": ("与字段无关", "not about this field")},
    "source": {"outside": ("脚本之外：评分程序或内核测得，脚本无法选择", "Outside: measured by the grader or the kernel"),
               "inside, cross-checked": ("脚本之内，已用外部证据核对", "Inside, cross-checked against outside evidence"),
               "inside": ("脚本之内：只有注入脚本的观察代码报告", "Inside: reported by the harness only")},
}


def generic_label(key: str, lang: str) -> str:
    """A key no table knows, as words: ``max_rel_diff`` -> ``Max rel diff`` / ``其他数值（max rel diff）``."""
    words = re.sub(r"[_.]+", " ", str(key)[:80]).strip() or str(key)[:80]
    return f"其他数值（{words}）" if lang == "zh" else words[:1].upper() + words[1:]


def value_label(kind: str, value: str, lang: str) -> str | None:
    """The readable name of an enumerated value (a verdict), or None when it has none."""
    hit = VALUES.get(kind, {}).get(value)
    return None if hit is None else hit[0 if lang == "zh" else 1]
