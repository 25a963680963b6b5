"""What one homework-1 run needs on disk, shared by the grader and the calibration.

``graders.ddp_speedup.grader`` (a student's job) and ``graders.ddp_speedup.calibration`` (the reference solution
between jobs) both stage a script and a data folder the same way; keeping that here lets
each import it without importing the other.
"""
from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from graders import cifar


def stage_script(src: Path, job: Path) -> Path:
    """Copy ``src`` to ``<job>/code/train.py``, readable by the sandbox's uid, and return that path."""
    code = job / "code"
    code.mkdir()
    script = code / "train.py"
    shutil.copyfile(src, script)
    os.chmod(code, 0o755)
    os.chmod(script, 0o644)
    return script


PINNED_SEED_ENV = "DISTGRADE_SYNTHETIC_SEED"


def synthetic_seed() -> int:
    """A fresh secret seed, or the one ``PINNED_SEED_ENV`` names: the repository's sample runner pins it
    so a sample's verdict does not depend on the draw. A worker never passes it on, and refuses to start
    with it set (``server.grading.worker``): a known seed makes the held-out set public."""
    pinned = os.environ.get(PINNED_SEED_ENV, "")
    return int(pinned) if pinned.isdigit() else secrets.randbits(62)


def data_dir(job: Path, mode: str, cfg: dict) -> tuple[Path, dict | None]:
    """(data folder, the synthetic set's parameters or None): the real CIFAR-10 on a GPU host that has
    it, else synthetic data in the job, its classes drawn from a seed secret to this job (with
    the repository's seed, weights fitted offline passed the grader's model evaluation). The
    parameters go to ``graders.evidence.model``, which draws the held-out set from the same seed."""
    real = os.environ.get("DISTGRADE_CIFAR_DIR")
    if mode == "gpu" and real and (Path(real) / cifar.FOLDER).is_dir():
        return Path(real), None
    root = job / "data"
    params = {**cfg.get("synthetic", {}), "seed": synthetic_seed()}
    cifar.write_synthetic(root, **params)
    return root, params
