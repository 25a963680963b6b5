"""The supervisor reads its folders from ``coursework.settings`` when it uses them, not through
attributes ``server.config`` computed for it."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest


def test_server_config_offers_no_folder_attributes() -> None:
    from server import config

    for name in ("REPO_ROOT", "VAR_DIR"):
        with pytest.raises(AttributeError):
            getattr(config, name)


def test_the_supervisor_puts_the_key_in_the_var_dir_set_after_it_was_imported(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from server import supervisor

    var = tmp_path / "later-var"
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(var))
    monkeypatch.delenv("SECRET_KEY", raising=False)
    said = supervisor.prepare_secret()
    assert str(var / "secret_key") in said and "generated" in said
    assert stat.S_IMODE(var.stat().st_mode) == 0o700 and (var / "secret_key").stat().st_size >= 16
    assert "kept" in supervisor.prepare_secret()
