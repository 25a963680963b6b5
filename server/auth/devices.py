"""What tells the owner of an account from someone guessing its password: a device they signed in
from before (a signed cookie), an address they signed in from before, and a count of the wrong
passwords tried since their last sign-in, which they are told about when they next sign in.

Kept in the limiter's storage (the service's Redis, or memory without one) beside the sign-in
counters. A storage that is down costs the owner's shortcuts, never a sign-in: the lookups then
answer "unknown" and the counters are skipped.
"""
from __future__ import annotations

import secrets
from typing import Any

from flask import current_app, request
from itsdangerous import BadSignature, URLSafeSerializer

from server.auth import counters

COOKIE = "dg_device"
COOKIE_DAYS = 180
KNOWN_DAYS = 60  # an address counts as the owner's for this long after a sign-in from it
MAX_ACCOUNTS = 8  # accounts remembered per browser (a shared lab machine)
_SALT = "distgrade device cookie v1"


def _serializer() -> URLSafeSerializer:
    return URLSafeSerializer(current_app.secret_key, salt=_SALT)


def _cookie() -> dict[str, Any]:
    raw = request.cookies.get(COOKIE)
    if not raw:
        return {}
    try:
        value = _serializer().loads(raw)
    except BadSignature:
        return {}  # forged or from another secret: an unknown device
    return value if isinstance(value, dict) else {}


def device_id(account: str) -> str | None:
    """This browser's device id if it signed in to ``account`` (normalised name) before, else None."""
    value = _cookie()
    return value.get("d") if account in value.get("a", []) else None


def remember(response: Any, account: str) -> None:
    """After a successful sign-in: this browser is a known device of ``account``."""
    value = _cookie()
    accounts = [a for a in value.get("a", []) if a != account][-(MAX_ACCOUNTS - 1):] + [account]
    token = _serializer().dumps({"d": value.get("d") or secrets.token_urlsafe(12), "a": accounts})
    response.set_cookie(COOKIE, token, max_age=COOKIE_DAYS * 86400, httponly=True, samesite="Lax",
                        secure=bool(current_app.config.get("SESSION_COOKIE_SECURE")))


def known_address(account: str, address: str) -> bool:
    """``account`` signed in successfully from ``address`` within ``KNOWN_DAYS``."""
    try:
        return bool(counters.storage().get(counters.key("known", account, address)))
    except Exception:  # storage down: unknown, the stricter limits apply
        return False


def signed_in(account: str, address: str) -> int:
    """Record a successful sign-in; returns the wrong passwords tried since the last one (and
    clears that count)."""
    try:
        storage = counters.storage()
        storage.incr(counters.key("known", account, address), KNOWN_DAYS * 86400)
        failed_key = counters.key("failed", account)
        failed = int(storage.get(failed_key) or 0)
        if failed:
            storage.clear(failed_key)
        return failed
    except Exception:  # storage down: nothing to tell
        return 0


def failed(account: str) -> None:
    """Count a wrong password for ``account``, to tell its owner at their next sign-in."""
    try:
        counters.storage().incr(counters.key("failed", account), KNOWN_DAYS * 86400)
    except Exception:
        pass  # storage down: the owner is not told of this one; the sign-in itself is unaffected
