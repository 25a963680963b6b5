"""CPU pre-flight: catch a broken submission on the CPU before it takes a GPU slot.

A GPU job first runs the assignment's own grader on the CPU (gloo, the grader's fast
mode: tiny synthetic data, ``fast_epochs``) under a tight wall clock. If a *gate*
check fails there (by default every ``run.*`` check: syntax and import errors, an
exception on any rank, a non-zero exit, "no training step was observed", a deadlock
in a collective), that report is the result: the same checks and messages the GPU
run would give, and no GPU is ever waited for. Otherwise the job goes on to wait for
its GPUs, and the status page says "checked on CPU, waiting for a GPU".

Fail-safe direction: a pre-flight must never give a wrong final verdict, so a run
that merely ran out of the pre-flight's short wall clock is *not* final: on a loaded
host the reference solution itself was caught "stuck" in its backward all-reduce by
the stack dump, exactly like a real deadlock. Desyncs are caught without a timeout
instead where the host's torch allows it: the pre-flight runs with
``TORCH_DISTRIBUTED_DEBUG=DETAIL``, which turns a rank calling a collective its peers
never call (the classic extra ``barrier``) into an immediate error on every rank
(``graders.desync`` words it). torch 2.13.0 SIGSEGVs DDP under DETAIL, so it is used
only where ``desync.detail_works`` passes on the host. What is left (a sleep, an
endless loop, a desync without DETAIL) is judged by the GPU run, whose wall clock and
NCCL watchdog bound it.

``assignment.json`` may say ``"preflight": {"gate": [...], "wall_s": 60, "enabled": true}``.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping

from coursework import settings as course_settings
from coursework.assignments import Assignment
from graders import desync

DEFAULT_WALL_S = 60


def settings(assignment: Assignment, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The assignment's pre-flight settings with defaults filled in."""
    env = os.environ if env is None else env
    raw = assignment.raw.get("preflight", {}) if isinstance(assignment.raw.get("preflight", {}), dict) else {}
    wall = int(env.get("DISTGRADE_PREFLIGHT_WALL_S") or raw.get("wall_s", DEFAULT_WALL_S))
    return {"enabled": bool(raw.get("enabled", True)), "gate": list(raw.get("gate", [])),
            "wall_s": max(5, min(wall, 600)), "detail": bool(raw.get("detail", True))}


def command(assignment: Assignment, path: str, submission_id: str | None = None,
            base_env: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """argv and environment of the pre-flight run (``python -m graders grade`` on the CPU)."""
    env = dict(os.environ if base_env is None else base_env)
    cfg = settings(assignment, env)
    limits = json.loads(env.get("DISTGRADE_LIMITS") or "{}")
    limits["wall_s"] = min(int(limits.get("wall_s", cfg["wall_s"])), cfg["wall_s"])
    env.update(DISTGRADE_FAST="1", DISTGRADE_PREFLIGHT="1", DISTGRADE_LIMITS=json.dumps(limits),
               CUDA_VISIBLE_DEVICES="")
    var_dir = env.get("DISTGRADE_VAR_DIR") or str(course_settings.var_dir())
    if cfg["detail"] and desync.detail_works(var_dir):
        env["DISTGRADE_DIST_DEBUG"] = "DETAIL"
    env.pop("DISTGRADE_GPUS", None)
    argv = [sys.executable, "-m", "graders", "grade", assignment.id, str(path), "--json", "--mode", "cpu"]
    if submission_id is not None:
        argv += ["--submission-id", str(submission_id)]
    return argv, env


def _gated(check_id: str, gate: list[str]) -> bool:
    return check_id in gate if gate else check_id.startswith("run.") or check_id == "run"


def _only_slow(check: Mapping[str, Any]) -> bool:
    """Ran out of the pre-flight's short time: maybe just slow here, so the GPU run decides."""
    ev = check.get("evidence") or {}
    return bool(ev.get("timed_out"))


def verdict(assignment: Assignment, report: Mapping[str, Any]) -> list[str]:
    """Gate checks that failed for real in the pre-flight; non-empty means the pre-flight is final.

    A crashed grader (``status: error``) is never final here: the GPU run retries it.
    """
    if report.get("status") != "graded":
        return []
    gate = settings(assignment)["gate"]
    return [c["id"] for c in report.get("checks", []) if isinstance(c, dict)
            and _gated(str(c.get("id", "")), gate) and c.get("status") == "fail" and not _only_slow(c)]


def final_report(report: dict[str, Any], failed: list[str]) -> dict[str, Any]:
    """The pre-flight report as the final result, saying that it never reached a GPU."""
    out = dict(report)
    summary = dict(out.get("summary") or {})
    summary["zh"] = "已在 CPU 预检中发现问题（" + "、".join(failed) + "），未在 GPU 上运行。" + summary.get("zh", "")
    summary["en"] = ("Found on the CPU pre-flight (" + ", ".join(failed) + "); not run on a GPU. "
                     + summary.get("en", ""))
    out["summary"] = summary
    out["preflight"] = {"final": True, "failed": failed}
    return out


def needs_preflight(assignment: Assignment, resource: str, mode: str) -> bool:
    """A job that will wait for a GPU slot gets a pre-flight first (unless the assignment opts out)."""
    return resource.startswith("gpu") and settings(assignment)["enabled"]

