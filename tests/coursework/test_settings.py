"""Settings are read when asked for: a changed environment is seen at once, with no module global to patch."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from coursework import assignments, settings


def test_paths_follow_the_environment_each_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DISTGRADE_VAR_DIR", raising=False)
    assert settings.var_dir() == settings.repo_root() / "var"
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "v1"))
    assert settings.var_dir() == tmp_path / "v1"
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "v2"))
    assert settings.var_dir() == tmp_path / "v2"
    assert (settings.repo_root() / "coursework" / "settings.py").is_file()
    assert settings.quizzes_dir() == settings.repo_root() / "quizzes"


def test_assignments_load_from_the_folder_set_after_import(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = [a.id for a in assignments.all_assignments()]
    assert "ddp_speedup" in real
    folder = tmp_path / "assignments" / "tiny"
    folder.mkdir(parents=True)
    (folder / "assignment.json").write_text(json.dumps({"title": {"zh": "小", "en": "tiny"}, "grader": "m:f"}))
    monkeypatch.setenv("DISTGRADE_ASSIGNMENTS_DIR", str(tmp_path / "assignments"))
    assert [a.id for a in assignments.all_assignments()] == ["tiny"]
    assert assignments.load("tiny").path == folder
    monkeypatch.delenv("DISTGRADE_ASSIGNMENTS_DIR")
    assert [a.id for a in assignments.all_assignments()] == real


def test_the_web_config_reads_the_environment_when_the_app_is_made(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    from server import config

    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("GRADE_TIMEOUT_S", "77")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    values = config.from_env()
    assert values["VAR_DIR"] == str(tmp_path / "var") and values["GRADE_TIMEOUT_S"] == 77
    assert values["SQLALCHEMY_DATABASE_URI"] == f"sqlite:///{tmp_path / 'var' / 'distgrade.db'}"
    from server import create_app

    app = create_app({"TESTING": True, "SECRET_KEY": "test"})  # made after the change: sees it
    assert app.config["GRADE_TIMEOUT_S"] == 77 and app.config["VAR_DIR"] == str(tmp_path / "var")
