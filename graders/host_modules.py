"""Modules an assignment tells students they may import, and whether this grading host has them.

Homework 1's README says the data loads with ``torchvision.datasets.CIFAR10``. A host without
torchvision (a CPU host with the CPU build of torch, for which PyPI has no matching torchvision)
would make every such script fail with ``ModuleNotFoundError``, and the report would blame the
student's import line for what the host lacks. ``assignment.json``'s ``"host_modules"`` names
those promises; a submission that imports one this host cannot import is not graded here: the
grading ends as an infrastructure failure (retried, no attempt used, staff see why), before any
run where the import is written out, after the run where it was dynamic. Workers and
``./distgrade up`` report the missing ones at start-up (``probe``).

Importable means ``import <name>`` succeeds in a fresh interpreter of the grader's own Python:
torchvision can be installed and still fail to import (a wheel built against another torch).
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

from graders.exceptions import InfrastructureError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MISSING = re.compile(r"No module named '([A-Za-z_][A-Za-z0-9_]*)")
IMPORT_WALL_S = 120  # importing torchvision imports torch: a minute on a loaded 2-core host


class HostLacksModule(InfrastructureError):
    """The submission imports a module its assignment promises and this host cannot import."""

    def __init__(self, name: str, why: str):
        super().__init__(f"this grading host cannot import {name}, which the assignment allows "
                         f"(assignment.json host_modules): {why}. Install it beside torch on the worker "
                         f"(TORCH_SPEC, see the README) or route this assignment to a host that has it")
        self.name, self.why = name, why


def promised(cfg: dict[str, Any]) -> list[str]:
    """The assignment's ``host_modules``: top-level module names, validated."""
    names = cfg.get("host_modules") or []
    return [n for n in names if isinstance(n, str) and _NAME.fullmatch(n)]


def imported(script: Path) -> set[str]:
    """Top-level names of the absolute imports written in ``script`` (none if it does not parse)."""
    try:
        tree = ast.parse(script.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def import_error(name: str) -> str | None:
    """None when ``import name`` works in a fresh interpreter of this Python, else the error's last line."""
    if not _NAME.fullmatch(name):
        return f"not a module name: {name!r}"
    try:
        r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                           timeout=IMPORT_WALL_S)
    except subprocess.TimeoutExpired:
        return f"import {name} took over {IMPORT_WALL_S} s"
    if r.returncode == 0:
        return None
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    return (lines[-1] if lines else f"exit status {r.returncode}")[:300]


def check_script(script: Path, cfg: dict[str, Any]) -> None:
    """Before any run: raise ``HostLacksModule`` if the script imports a promised module this host lacks."""
    for name in sorted(imported(script) & set(promised(cfg))):
        why = import_error(name)
        if why:
            raise HostLacksModule(name, why)


def check_raised(exceptions: Iterable[dict[str, Any] | None], cfg: dict[str, Any]) -> None:
    """After the runs: a rank's ``ModuleNotFoundError`` for a promised module (imported at run time,
    so ``check_script`` could not see it) is the host's failure too, if the host cannot import it."""
    allowed = set(promised(cfg))
    for exc in exceptions:
        if not exc or exc.get("exc_type") != "ModuleNotFoundError":
            continue
        m = _MISSING.match(str(exc.get("message", "")))
        if m and m.group(1) in allowed:
            why = import_error(m.group(1))
            if why:
                raise HostLacksModule(m.group(1), why)


def probe(assignments: Iterable[Any]) -> list[str]:
    """One line per promised module this host cannot import, naming the assignments that promise it."""
    by_module: dict[str, list[str]] = {}
    for a in assignments:
        for name in promised(a.raw):
            by_module.setdefault(name, []).append(a.id)
    lines = []
    for name, ids in sorted(by_module.items()):
        why = import_error(name)
        if why:
            lines.append(f"{name} ({', '.join(ids)}): {why}")
    return lines


def host_probe() -> dict[str, Any]:
    """What a worker reports at start-up: the sandbox probe, plus ``modules`` (``probe`` over every assignment)."""
    from coursework.assignments import all_assignments
    from graders import sandbox

    return {**sandbox.probe(), "modules": probe(all_assignments())}
