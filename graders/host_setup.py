"""``python -m graders.host_setup``: what ``./distgrade install`` adds so that this host grades every
module an assignment allows (``assignment.json``'s ``host_modules``), as the worker image does.

``./distgrade`` installed torch only, so a script importing torchvision (most public DDP tutorials
do) was "not graded here" on the very host the README sets up. After torch is installed (as
``TORCH_SPEC`` says, unchanged), this prints one pip invocation per index for the promised modules
this interpreter cannot import: a torch companion (torchvision, torchaudio) pinned to the build made
for the installed torch, from the CPU wheel index when that torch is a CPU build (a PyPI
torchvision is built against PyPI's CUDA torch and fails to load beside a ``+cpu`` one: "operator
torchvision::nms does not exist"), and any other module from the default index.
"""
from __future__ import annotations

import re
import sys
from typing import Iterable

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\+(\w+))?")


def companion(module: str, torch_version: str) -> str | None:
    """The pip requirement of the ``module`` build made for ``torch_version`` (None: not a torch companion)."""
    m = _VERSION.match(torch_version)
    if m is None:
        return None
    major, minor, patch, local = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    versions = {"torchvision": f"0.{minor + 15}.{patch}", "torchaudio": f"{major}.{minor}.{patch}"}
    if module not in versions:
        return None
    return f"{module}=={versions[module]}" + (f"+{local}" if local else "")


def install_plan(missing: Iterable[str], torch_version: str, index_url: str = "") -> list[list[str]]:
    """pip arguments (after ``pip install``), one list per index, for the ``missing`` modules."""
    cpu = "+cpu" in torch_version
    companions, others = [], []
    for name in sorted(set(missing)):
        spec = companion(name, torch_version)
        (companions if spec else others).append(spec or name)
    plan = []
    if companions:
        index = index_url or (CPU_INDEX if cpu else "")
        plan.append((["--index-url", index] if index else []) + companions)
    if others:
        plan.append(others)
    return plan


def missing_modules() -> list[str]:
    """The promised modules (every assignment's ``host_modules``) this interpreter cannot import."""
    from coursework.assignments import all_assignments
    from graders.host_modules import import_error, promised

    names = {name for a in all_assignments() for name in promised(a.raw)}
    return sorted(n for n in names if import_error(n))


def main(argv: list[str] | None = None) -> int:
    """Print one line of pip arguments per index (nothing when every promised module imports)."""
    import os

    import torch

    for args in install_plan(missing_modules(), torch.__version__, os.environ.get("TORCH_INDEX_URL", "")):
        print(" ".join(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
