"""Where things are: every path setting, read from the environment each time it is asked for.

Nothing is read at import, so a test (or a worker started with another environment) sets the
variable and every caller sees it; no module keeps a copy in a global.
"""
from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout: the folder holding ``server/``, ``graders/``, ``coursework/`` and the content."""
    return Path(__file__).resolve().parent.parent


def var_dir() -> Path:
    """``DISTGRADE_VAR_DIR``: the database, the session key, Redis's files, calibrations, caches."""
    return Path(os.environ.get("DISTGRADE_VAR_DIR") or repo_root() / "var")


def assignments_dir() -> Path:
    """``DISTGRADE_ASSIGNMENTS_DIR``: one folder per assignment (``assignments/`` by default)."""
    return Path(os.environ.get("DISTGRADE_ASSIGNMENTS_DIR") or repo_root() / "assignments")


def quizzes_dir() -> Path:
    """The quiz bank: one folder per question under ``quizzes/``."""
    return repo_root() / "quizzes"
