"""Scores of the notebook's structured answers, computed the same way in two places.

The notebook's hidden test cells call these inside the sandboxed kernel, so nbgrader's
gradebook records the numbers; the worker calls them again outside the sandbox on answers
read statically from the upload (``ast.literal_eval``, never executed), and counts the lower
of the two: student code that fakes a passing test cell cannot raise its own score.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

from graders import memory_calc
from graders.assignments import ASSIGNMENTS_DIR

ANSWER_KEY = ASSIGNMENTS_DIR / "config_annotation" / "answer_key.json"


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


def _get(d: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return default
        d = d[part]
    return d


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
    bf16, fp16 = _get(answer, "bf16.enabled") is True, _get(answer, "fp16.enabled") is True
    parts["precision"] = bf16 and not fp16
    stage = _get(answer, "zero_optimization.stage", 0)
    o_dev = str(_get(answer, "zero_optimization.offload_optimizer.device", "none")).lower()
    p_dev = str(_get(answer, "zero_optimization.offload_param.device", "none")).lower()
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


def mapping_score(answer: Any, max_points: float) -> float:
    """For the hidden test cell: the mapping's points (its value becomes nbgrader's partial credit)."""
    return grade_mapping(answer, max_points).points


def scenario_score(answer: Any, max_points: float) -> float:
    """For the hidden test cell: the scenario config's points."""
    return grade_scenario(answer, max_points).points


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
