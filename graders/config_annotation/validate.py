"""Config validation a student learns from: unknown keys, types, and the cross-field rules
DeepSpeed / the Trainer enforce themselves, plus the per-card memory the config implies.

Every finding is a small dataclass with a bilingual message; ``grade.py`` turns the lists
into the ``config.schema`` and ``config.rules`` checks.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from coursework import memory_calc
from coursework.config_annotation.parse import ParsedConfig
from coursework.report import Text, text
from coursework.config_annotation.catalogue import Catalogue

CARDS_IN_NOTE = re.compile(r"(\d+)\s*(?:x\s*)?(?:gpus?|cards?|ranks?|processes|张卡|块卡|张\s*gpu|个\s*gpu|卡|个进程)",
                           re.IGNORECASE)
BOOL_FIELDS = ("enabled", "overlap_comm", "contiguous_gradients", "reduce_scatter", "allgather_partitions",
               "pin_memory", "round_robin_gradients", "zero_allow_untested_optimizer",
               "stage3_gather_16bit_weights_on_model_save", "fsdp_offload_params", "bf16", "fp16", "pure_bf16",
               "fsdp_forward_prefetch", "fsdp_sync_module_states", "fsdp_use_orig_params",
               "fsdp_cpu_ram_efficient_loading")
INT_FIELDS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
              "per_device_train_batch_size", "num_processes", "num_machines")


@dataclass
class Finding:
    """One problem found in the config: the key path it concerns and what is wrong."""

    path: str
    code: str  # unknown_key, bad_type, batch_mismatch, ...
    message: Text
    severity: str = "fail"  # fail or warn


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def schema_findings(parsed: ParsedConfig, dialect: str, catalogue: Catalogue) -> list[Finding]:
    """Unknown keys (with the nearest valid one) and values of the wrong type."""
    known = catalogue.known_keys(dialect)
    out: list[Finding] = []
    unknown_parents: list[str] = []
    for path, f in parsed.fields.items():
        if any(path.startswith(p + ".") for p in unknown_parents):
            continue  # children of an unknown block are not reported one by one
        if path not in known and not any(path.startswith(k + ".") and k in ("optimizer", "scheduler",
                                         "activation_checkpointing", "flops_profiler", "tensorboard",
                                         "comms_logger", "checkpoint", "data_types", "amp") for k in known):
            parent = path.rsplit(".", 1)[0] + "." if "." in path else ""
            siblings = [k[len(parent):] for k in known if k.startswith(parent) and "." not in k[len(parent):]]
            close = difflib.get_close_matches(_leaf(path), siblings, n=1, cutoff=0.75)
            hint_en = f"; did you mean `{parent}{close[0]}`?" if close else ""
            hint_zh = f"；是不是想写 `{parent}{close[0]}`？" if close else ""
            out.append(Finding(path, "unknown_key", text(
                f"第 {f.line} 行：未知字段 `{path}`，框架会直接忽略它{hint_zh}",
                f"line {f.line}: unknown key `{path}`, the framework silently ignores it{hint_en}")))
            if f.is_block:
                unknown_parents.append(path)
            continue
        out += _type_findings(path, f.value, f.line)
    return out


def _type_findings(path: str, value: Any, line: int) -> list[Finding]:
    leaf = _leaf(path)
    if leaf in BOOL_FIELDS and not isinstance(value, (bool, dict)) and value != "auto":
        return [Finding(path, "bad_type", text(f"第 {line} 行：`{path}` 应为 true/false，实际是 {value!r}。",
                                               f"line {line}: `{path}` must be true/false, got {value!r}."))]
    if leaf in INT_FIELDS and value != "auto" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        return [Finding(path, "bad_type", text(f"第 {line} 行：`{path}` 应为正整数或 \"auto\"，实际是 {value!r}。",
                                               f"line {line}: `{path}` must be a positive integer or \"auto\", got {value!r}."))]
    if path == "zero_optimization.stage" and value not in (0, 1, 2, 3):
        return [Finding(path, "bad_type", text(f"第 {line} 行：ZeRO 级别只能是 0、1、2、3，实际是 {value!r}。",
                                               f"line {line}: the ZeRO stage must be 0, 1, 2 or 3, got {value!r}."))]
    if leaf == "device" and str(value).lower() not in ("cpu", "nvme", "none"):
        return [Finding(path, "bad_type", text(f"第 {line} 行：`{path}` 只能是 cpu、nvme 或 none，实际是 {value!r}。",
                                               f"line {line}: `{path}` must be cpu, nvme or none, got {value!r}."))]
    return []


def get_path(data: Any, path: str, default: Any = None) -> Any:
    """``data["a"]["b"]`` for the dotted path ``"a.b"``; ``default`` where any step is missing."""
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _enabled(data: dict, key: str) -> bool:
    v = data.get(key)
    return v is True or (isinstance(v, dict) and v.get("enabled") is True)


def cards_from_notes(parsed: ParsedConfig) -> int | None:
    """The number of cards the student's own annotations assume ("on 8 GPUs"), if any."""
    for f in parsed.fields.values():
        if f.path in ("train_batch_size", "gradient_accumulation_steps", "train_micro_batch_size_per_gpu",
                      "num_processes", "per_device_train_batch_size"):
            m = CARDS_IN_NOTE.search(f.comment)
            if m:
                return int(m.group(1))
    return None


def rule_findings(parsed: ParsedConfig, dialect: str) -> tuple[list[Finding], dict[str, Any]]:
    """Cross-field rules; also returns facts worth showing (implied world size)."""
    data, out, facts = parsed.data, [], {}
    if dialect == "deepspeed":
        stage = get_path(data, "zero_optimization.stage", 0)
        stage = stage if isinstance(stage, int) else 0
        p_dev = str(get_path(data, "zero_optimization.offload_param.device", "none")).lower()
        o_dev = str(get_path(data, "zero_optimization.offload_optimizer.device", "none")).lower()
        if p_dev != "none" and stage != 3:
            out.append(Finding("zero_optimization.offload_param", "offload_param_stage", text(
                f"offload_param 只在 ZeRO-3 有效（只有 3 级才切分参数），而这里是 {stage} 级。",
                f"offload_param only works with ZeRO-3 (only stage 3 shards parameters); this config uses stage {stage}.")))
        if o_dev != "none" and stage < 1:
            out.append(Finding("zero_optimization.offload_optimizer", "offload_optimizer_stage", text(
                "offload_optimizer 需要 ZeRO 1 级以上：0 级不切分优化器状态，无从卸载。",
                "offload_optimizer needs ZeRO stage 1 or higher: stage 0 does not partition optimizer states.")))
        stage3_keys = [k for k in (get_path(data, "zero_optimization", {}) or {}) if str(k).startswith("stage3_")]
        if stage3_keys and stage != 3:
            out.append(Finding("zero_optimization", "stage3_keys_ignored", text(
                f"{', '.join(stage3_keys)} 只在 3 级生效，{stage} 级下会被忽略。",
                f"{', '.join(stage3_keys)} only apply to stage 3 and are ignored at stage {stage}."), "warn"))
        batch = [data.get(k) for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                        "gradient_accumulation_steps")]
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in batch):
            total, micro, accum = batch
            cards = cards_from_notes(parsed)
            if total % (micro * accum):
                out.append(Finding("train_batch_size", "batch_mismatch", text(
                    f"train_batch_size（{total}）必须等于 micro-batch（{micro}）× 累积步数（{accum}）× 卡数，"
                    f"但 {total} 不能被 {micro * accum} 整除。",
                    f"train_batch_size ({total}) must equal micro-batch ({micro}) x accumulation ({accum}) x cards, "
                    f"but {total} is not divisible by {micro * accum}.")))
            elif cards and total != micro * accum * cards:
                out.append(Finding("train_batch_size", "batch_vs_note", text(
                    f"你的注释说用 {cards} 张卡，但 {micro} × {accum} × {cards} = {micro * accum * cards}，不是 {total}。",
                    f"Your annotation says {cards} cards, but {micro} x {accum} x {cards} = {micro * accum * cards}, "
                    f"not {total}.")))
            else:
                facts["world_size"] = total // (micro * accum)
    elif dialect == "llamafactory":
        if data.get("deepspeed") and data.get("fsdp"):
            out.append(Finding("fsdp", "deepspeed_and_fsdp", text(
                "deepspeed 和 fsdp 不能同时开启：二者是两套分片方案，只能选一个。",
                "deepspeed and fsdp cannot both be set: they are two sharding schemes, pick one.")))
        offload = get_path(data, "fsdp_config.fsdp_offload_params") is True
        strategy = str(data.get("fsdp") or get_path(data, "fsdp_config.fsdp_sharding_strategy", "")).lower()
        if offload and "no_shard" in strategy:
            out.append(Finding("fsdp_config.fsdp_offload_params", "offload_no_shard", text(
                "no_shard 不切分参数，参数卸载在这里没有意义。", "no_shard does not shard parameters; offloading them makes no sense here.")))
        if isinstance(data.get("num_processes"), int):
            facts["world_size"] = data["num_processes"]  # accelerate counts processes over all machines
    both = _enabled(data, "bf16") and _enabled(data, "fp16")
    if both or (dialect == "llamafactory" and data.get("pure_bf16") and data.get("fp16")):
        out.append(Finding("fp16", "bf16_and_fp16", text(
            "bf16 和 fp16 不能同时开启：混合精度只能选一种 16 位格式。",
            "bf16 and fp16 cannot both be enabled: mixed precision uses one 16-bit format.")))
    return out, facts


def memory_setup(parsed: ParsedConfig, dialect: str, params: float, cards: int) -> memory_calc.TrainingSetup:
    """The memory calculator's view of this config (Adam, mixed precision unless fp32)."""
    data = parsed.data
    precision = "bf16" if (_enabled(data, "bf16") or data.get("pure_bf16") or data.get("mixed_precision") == "bf16") \
        else "fp16" if (_enabled(data, "fp16") or data.get("mixed_precision") == "fp16") else "bf16"
    if dialect == "deepspeed":
        stage = get_path(data, "zero_optimization.stage", 0)
        stage = stage if stage in (0, 1, 2, 3) else 0
        p_off = str(get_path(data, "zero_optimization.offload_param.device", "none")).lower() != "none" and stage == 3
        o_off = str(get_path(data, "zero_optimization.offload_optimizer.device", "none")).lower() != "none" and stage >= 1
        return memory_calc.TrainingSetup(params=params, cards=cards, precision=precision, stage=stage,
                                         offload_optimizer=o_off, offload_params=p_off)
    words = str(data.get("fsdp") or get_path(data, "fsdp_config.fsdp_sharding_strategy", "")).lower()
    strategy = next((s for s in memory_calc.FsdpStrategy if s.value.lower() in words), None)
    offload = (get_path(data, "fsdp_config.fsdp_offload_params") is True or "offload" in words.split()) \
        and strategy == memory_calc.FsdpStrategy.FULL_SHARD
    return memory_calc.TrainingSetup(params=params, cards=cards, precision=precision, fsdp=strategy,
                                     offload_optimizer=offload, offload_params=offload)
