"""One process-wide memory of a Redis that failed a moment ago, so that no request waits on it twice.

A Redis that hangs (accepts connections, never answers) costs each call its socket timeout, and
redis-py retries timed-out calls on top of that. Every caller here (the grading queue, the sign-in
counters) has a fallback that needs no Redis; what it must not do is pay the timeout again for
every call of every request. After one failure the process leaves Redis alone for ``REDIS_SKIP_S``:
``redis_conn`` of the queue raises ``RedisAway`` at once, and a ``skipping_pool`` (the sign-in
limiter's) refuses to connect, so the caller's fallback runs at once.
"""
from __future__ import annotations

import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

REDIS_SKIP_S = 5.0  # after a failed call, this process leaves Redis alone this long
_skip_until = 0.0


class RedisAway(redis.exceptions.ConnectionError):
    """Redis failed a moment ago in this process: not asked again yet (the caller's fallback applies)."""


def skipping() -> bool:
    """True while this process leaves Redis alone after a failure."""
    return time.monotonic() < _skip_until


def redis_failed() -> None:
    """A Redis call failed: skip Redis in this process for ``REDIS_SKIP_S``."""
    global _skip_until
    _skip_until = time.monotonic() + REDIS_SKIP_S


def redis_recovered() -> None:
    """Ask Redis again at the next call (tests, and a caller that knows it is back)."""
    global _skip_until
    _skip_until = 0.0


class _MarksFailure:
    """A redis-py connection that records its failures (``redis_failed``) and, while Redis is
    skipped, refuses to connect: redis-py's own retries then end at once too."""

    def connect(self, *args: Any, **kwargs: Any) -> Any:
        if skipping():
            raise RedisAway("Redis failed a moment ago in this process")
        return self._marking(super().connect, *args, **kwargs)  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        return self._marking(super().read_response, *args, **kwargs)  # type: ignore[misc]

    def send_command(self, *args: Any, **kwargs: Any) -> Any:
        if skipping():  # a pooled connection, still open: do not write into a hung socket either
            self.disconnect()  # type: ignore[attr-defined]
            raise RedisAway("Redis failed a moment ago in this process")
        return self._marking(super().send_command, *args, **kwargs)  # type: ignore[misc]

    @staticmethod
    def _marking(call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            redis_failed()
            raise


def skipping_pool(url: str, timeout_s: float) -> redis.ConnectionPool:
    """A connection pool for ``url`` whose connections skip Redis after a failure (see the module)."""
    kwargs = redis.connection.parse_url(url.replace("redis+unix://", "unix://"))
    base = kwargs.pop("connection_class", redis.connection.Connection)
    kind = type(f"Skipping{base.__name__}", (_MarksFailure, base), {})
    # no retries: a timed-out call is the failure this module remembers, not one to repeat
    return redis.ConnectionPool(connection_class=kind, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                retry=Retry(NoBackoff(), 0), **kwargs)
