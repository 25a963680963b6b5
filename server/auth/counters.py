"""Where the sign-in counters live, and their keys: the back-off's (``throttle``) and the owner's
shortcuts (``devices``) share the limiter's storage under one prefix."""
from __future__ import annotations

import hashlib
from typing import Any

from flask import current_app
from limits.storage import MemoryStorage

from server.redis_skip import skipping

KEY_PREFIX = "distgrade-login"


def key(kind: str, *parts: str) -> str:
    """A storage key: prefixed, the account and address parts hashed (no name is kept in clear)."""
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
    return f"{KEY_PREFIX}:{kind}:{digest}"


def storage() -> Any:
    """Where the back-off's counters live: the limiter's storage, or the memory it falls back to
    while Redis is away (this process then leaves Redis alone: ``server.redis_skip``)."""
    if skipping():
        memory = current_app.extensions.get("distgrade_login_memory")
        if memory is None:
            memory = current_app.extensions.setdefault("distgrade_login_memory", MemoryStorage())
        return memory
    return current_app.extensions["distgrade_limiter"].limiter.storage
