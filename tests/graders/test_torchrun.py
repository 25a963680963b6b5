"""How the torchrun runner builds its sandboxed command, checked without running it (no GPU here)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from graders import sandbox, torchrun
from graders.sandbox import SandboxResult


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Replace sandbox.run by a recorder that returns a clean exit."""
    seen: dict = {}

    def fake_run(argv, **kwargs):
        seen.update(argv=list(argv), **kwargs)
        return SandboxResult(returncode=0, timed_out=False, wall_s=0.1)
    monkeypatch.setattr(sandbox, "run", fake_run)
    return seen


def _launch(tmp_path: Path, mode: str, gpus: list[int] | None) -> None:
    script = tmp_path / "code" / "train.py"
    script.parent.mkdir()
    script.write_text("pass\n")
    os.chmod(tmp_path, 0o711)
    torchrun.run(script, 2, root=tmp_path / "n2", data_dir=tmp_path, epochs=3,
                 limits=torchrun.make_limits({"wall_s": 5}), mode=mode, gpus=gpus)


def test_gpu_mode_leaves_device_selection_to_the_sandbox(tmp_path: Path, captured: dict) -> None:
    _launch(tmp_path, "gpu", [2, 3])
    env = captured["env"]
    assert captured["gpus"] == [2, 3]  # host numbers go to the sandbox, which binds those device nodes
    assert "CUDA_VISIBLE_DEVICES" not in env and "OMP_NUM_THREADS" not in env
    assert env["DISTGRADE_MODE"] == "gpu"
    assert "--nproc_per_node=2" in captured["argv"] and captured["argv"][-4:] == ["--data-dir", str(tmp_path),
                                                                                  "--epochs", "3"]
    # what the ranks then see: renumbered inside bwrap, host numbers when there is no bwrap
    for isolated, visible in ((True, "0,1"), (False, "2,3")):
        _, gpu_env = sandbox.gpu_setup(captured["gpus"], dev_dir=str(tmp_path), isolated=isolated)
        final = {**env, **gpu_env}
        assert (final["CUDA_VISIBLE_DEVICES"], final["DISTGRADE_HOST_GPUS"]) == (visible, "2,3")


def test_cpu_mode_hides_every_gpu_and_pins_one_thread(tmp_path: Path, captured: dict) -> None:
    _launch(tmp_path, "cpu", None)
    env = captured["env"]
    assert captured["gpus"] is None
    assert (env["CUDA_VISIBLE_DEVICES"], env["OMP_NUM_THREADS"]) == ("", "1")
