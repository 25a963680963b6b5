"""The notebook's structured answers, read and scored outside the kernel.

The worker reads each answer statically from the upload (``ast.literal_eval``, never
executed) and scores it here against ``answer_key.json``; the sandboxed kernel never sees the
key. The notebook's test cells only check each answer's format, and ``format_problem`` is the
same check on the literal, so a run whose format test passed for an answer that is malformed
as written shows that the kernel was fooled.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any, Collection

from coursework import memory_calc
from coursework.settings import assignments_dir
from graders.config_annotation.validate import get_path

ANSWER_KEY = assignments_dir() / "config_annotation" / "answer_key.json"


@dataclass
class AnswerScore:
    """Points for one structured answer, with what was right and wrong."""

    points: float
    max_points: float
    details: dict[str, Any] = field(default_factory=dict)


def _key() -> dict[str, Any]:
    return json.loads(ANSWER_KEY.read_text(encoding="utf-8"))


def grade_mapping(answer: Any, max_points: float) -> AnswerScore:
    """Field -> concept id mapping: an equal share of the points per field."""
    expected = _key()["mapping"]
    if not isinstance(answer, dict):
        return AnswerScore(0.0, max_points, {"error": "not a dict"})
    right = [k for k, v in expected.items() if answer.get(k) == v]
    wrong = {k: {"given": answer.get(k), "expected": v} for k, v in expected.items() if answer.get(k) != v}
    return AnswerScore(round(max_points * len(right) / len(expected), 2), max_points,
                       {"right": right, "wrong": wrong})


def grade_scenario(answer: Any, max_points: float) -> AnswerScore:
    """A DeepSpeed config for the scenario in ``answer_key.json``: batch arithmetic, precision,
    valid offload, and model states that fit the cards by the shared memory calculator."""
    sc = _key()["scenario"]
    if not isinstance(answer, dict):
        return AnswerScore(0.0, max_points, {"error": "not a dict"})
    parts: dict[str, bool] = {}
    micro, accum, total = (answer.get(k) for k in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                                   "train_batch_size"))
    parts["batch"] = (micro == sc["micro_batch"] and isinstance(accum, int) and total == sc["global_batch"]
                      and micro * accum * sc["cards"] == total)
    bf16, fp16 = get_path(answer, "bf16.enabled") is True, get_path(answer, "fp16.enabled") is True
    parts["precision"] = bf16 and not fp16
    stage = get_path(answer, "zero_optimization.stage", 0)
    o_dev = str(get_path(answer, "zero_optimization.offload_optimizer.device", "none")).lower()
    p_dev = str(get_path(answer, "zero_optimization.offload_param.device", "none")).lower()
    parts["offload_valid"] = stage in (0, 1, 2, 3) and (p_dev == "none" or stage == 3) and (o_dev == "none" or stage >= 1)
    gb = None
    if parts["offload_valid"]:
        setup = memory_calc.TrainingSetup(params=sc["params"], cards=sc["cards"], stage=stage,
                                          offload_optimizer=o_dev != "none", offload_params=p_dev != "none")
        gb = round(memory_calc.estimate(setup).total_gb, 1)
    parts["fits"] = gb is not None and gb <= sc["max_gb_per_card"]
    weights = sc["weights"]
    earned = sum(weights[k] for k, ok in parts.items() if ok)
    return AnswerScore(round(max_points * earned / sum(weights.values()), 2), max_points,
                       {"parts": parts, "gb_per_card": gb})


BATCH_FIELDS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def format_problem(answer_id: str, value: Any, menu: Collection[str]) -> tuple[str, dict[str, Any]] | None:
    """What is malformed in an answer, as (code, facts), or None when it is well-formed.

    The same checks, in the same order, as the notebook's test cells (which cannot import this
    module); ``menu`` is the concept ids of the notebook's locked ``CONCEPT_MENU``."""
    if answer_id == "mapping":
        if not isinstance(value, dict):
            return "not_dict", {}
        not_text = [k for k in value if not isinstance(k, str)]
        if not_text:
            return "key_not_str", {"keys": not_text}
        unknown = {k: v for k, v in value.items() if not isinstance(v, str) or v not in menu}
        if unknown:
            return "not_in_menu", {"unknown": unknown}
    elif answer_id == "scenario":
        if not isinstance(value, dict):
            return "not_dict", {}
        if not isinstance(value.get("zero_optimization"), dict):
            return "no_zero_optimization", {}
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            return "not_json", {"error": str(e)}
        not_int = {k: value[k] for k in BATCH_FIELDS if k in value and type(value[k]) is not int}
        if not_int:
            return "batch_not_int", {"fields": not_int}
    elif answer_id == "annotated" and (not isinstance(value, str) or not value.strip()):
        return "empty_text", {}
    return None


def literal_assignment(source: str, name: str) -> tuple[bool, Any]:
    """(found, value) of the last top-level ``name = <literal>`` in a cell, read without running it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False, None
    found, value = False, None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                found, value = True, ast.literal_eval(node.value)
            except ValueError:
                found, value = False, None
    return found, value
