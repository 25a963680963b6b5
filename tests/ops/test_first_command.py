"""``./distgrade up`` sets up a host that grades everything the homework allows.

It installed torch only, so a script importing torchvision (homework 1's ``host_modules``; most
public DDP tutorials and the torchvision reference recipe) was "not graded here" on the host the
README sets up. After torch, ``./distgrade install`` now installs each promised module this host
cannot import, a torch companion as the build made for the installed torch: from the CPU wheel
index beside a CPU torch (a PyPI torchvision fails to load beside ``+cpu``: "operator
torchvision::nms does not exist"), as the worker image pins it beside its torch.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from graders import host_setup

REPO = Path(__file__).resolve().parents[2]


def test_the_plan_installs_the_companion_built_for_the_installed_torch():
    cpu = host_setup.install_plan(["tqdm", "torchvision"], "2.13.0+cpu")
    assert cpu == [["--index-url", host_setup.CPU_INDEX, "torchvision==0.28.0+cpu"], ["tqdm"]]
    assert host_setup.install_plan(["torchvision"], "2.14.1") == [["torchvision==0.29.1"]]  # PyPI's torch: PyPI's
    assert host_setup.install_plan(["torchvision"], "2.13.0+cpu", "https://mirror.example/cpu") == [
        ["--index-url", "https://mirror.example/cpu", "torchvision==0.28.0+cpu"]]  # TORCH_INDEX_URL wins
    assert host_setup.install_plan([], "2.13.0+cpu") == []


def test_the_companion_matches_the_worker_images_pin():
    worker = (REPO / "Dockerfile").read_text().split("AS worker", 1)[1]
    torch, vision = re.search(r'TORCH_SPEC="torch==([\d.]+) torchvision==([\d.]+)"', worker).groups()
    assert host_setup.companion("torchvision", torch) == f"torchvision=={vision}"


def test_this_host_is_told_what_to_install_for_every_promised_module():
    """A real interpreter over the real assignments: what it cannot import is what it is told to install."""
    import importlib.util

    out = subprocess.run([sys.executable, "-m", "graders.host_setup"], cwd=REPO, capture_output=True, text=True,
                         check=True, timeout=300).stdout
    import torch

    if importlib.util.find_spec("torchvision") is None:
        assert host_setup.companion("torchvision", torch.__version__) in out
    assert "tqdm" not in out or importlib.util.find_spec("tqdm") is None


def test_the_first_command_runs_the_plan():
    script = (REPO / "distgrade").read_text()
    install = script[script.index("ensure_venv() {"):script.index("cmd=")]
    assert "graders.host_setup" in install and "pip install -q $args" in install
    assert install.index("TORCH_SPEC") < install.index("graders.host_setup")  # after torch, as TORCH_SPEC says
