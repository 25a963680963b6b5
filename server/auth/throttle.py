"""Sign-in throttling: failed sign-ins are counted so that the guesser is slowed, not the owner.

Only failures count (the view answers 401). Two limits refuse (moving windows, Flask-Limiter):

* per address, ``LOGIN_LIMIT_ADDRESS`` (default 30 per minute: a lab shares one address);
* a browser the owner signed in from before (``devices``: a signed cookie) passes every other
  limit and has a bucket of its own, ``LOGIN_LIMIT`` per account and device.

Two limits *slow* instead of refusing (``gate``): per account *and* address, ``LOGIN_LIMIT``
(default 5 per minute: one guesser at one address), and per account from anywhere,
``LOGIN_LIMIT_ACCOUNT`` (default 30 per hour: guessing from many addresses; an address the owner
signed in from before passes it). Over either, an account takes one sign-in at a time: each wrong
password there closes the account's turn for a back-off that doubles, 2, 4, 8 ... up to
``LOGIN_BACKOFF_MAX`` seconds (default 60), and whoever comes while it is closed is told "try again
in N s" (HTTP 429) before the password is checked. The owner in a fresh browser behind a
guesser's address (a lab's NAT) therefore waits seconds, not the rest of the window: the right
password gets in at the next turn. What guessing costs: past the free five a minute, at most one
guess per ``LOGIN_BACKOFF_MAX`` seconds per account from everywhere together (60 an hour, 1,440 a
day at the default), however many addresses the guesser has. A script that fires the moment each
turn opens can still make the owner retry; a known browser or address, or the LMS launch, skips
the turn. The owner is told at their next sign-in how many wrong passwords were tried.

The counters live in the service's Redis (``REDIS_URL``, the embedded one under ``./distgrade up``),
so every gunicorn process shares them. Without a Redis URL (tests, a bare ``flask run``) they are
kept in memory, per process, and the app says so in its log; if Redis goes away while the service
runs, Flask-Limiter falls back to memory the same way and returns to Redis when it is back. A Redis
that hangs costs one sign-in its 1 s timeout: after that failure the process leaves Redis alone for
a few seconds (``server.redis_skip``), the limiter's health checks and the device lookups included.
"""
from __future__ import annotations

import functools
import math
import time

from flask import Flask, current_app, flash, g, make_response, render_template, request
from flask_babel import gettext as _
from flask_limiter import Limiter, RequestLimit
from flask_limiter.util import get_remote_address
from limits import parse

from server.auth import devices
from server.auth.counters import KEY_PREFIX, key, storage
from server.auth.forms import LoginForm, PasswordForm
from server.redis_skip import skipping_pool

LOGIN_ENDPOINT = "auth.login"
PASSWORD_ENDPOINT = "auth.password"  # a wrong current password counts like a failed sign-in


def storage_uri(redis_url: str) -> str:
    """Flask-Limiter's URI for the service's Redis URL (``unix://`` is spelled ``redis+unix://`` there)."""
    if redis_url.startswith("unix://"):
        return "redis+" + redis_url
    return redis_url


def account_key() -> str:
    """The account a sign-in is for, as typed, normalised (case and surrounding spaces do not matter).

    On the password page it is the signed-in account, whatever the form says.
    """
    if request.endpoint == PASSWORD_ENDPOINT:
        from flask_login import current_user

        name = current_user.username.lower() if current_user.is_authenticated else ""
    else:
        name = (request.form.get("username") or "").strip().lower()[:80]
    return "account:" + (name or "-")


def address_key() -> str:
    return "address:" + (get_remote_address() or "-")


def account_name() -> str:
    """``account_key`` without its prefix: the normalised account name a sign-in is for."""
    return account_key().split(":", 1)[1]


def pair_key() -> str:
    """The account and the address together: one guesser at one place."""
    return account_key() + "|" + address_key()


def device_key() -> str:
    """The account and the owner's known browser (``devices``)."""
    return account_key() + "|device:" + (devices.device_id(account_name()) or "-")


def _known_device() -> bool:
    return devices.device_id(account_name()) is not None


def _owner_like() -> bool:
    """A known browser, or an address the owner signed in from: passes the per-account limit."""
    return _known_device() or devices.known_address(account_name(), get_remote_address() or "-")


def backoff_s(level: int, cap: float) -> int:
    """The wait after the ``level``-th wrong password over the limit: 2, 4, 8 ... seconds, at most ``cap``."""
    return int(min(cap, 2 ** max(1, min(level, 30))))


def _over(storage) -> bool:
    """Whether this sign-in is over the account-and-address limit, or (from a browser and address
    the owner never used) over the account limit: then it waits for the account's turn."""
    cfg = current_app.config
    pair, account = parse(cfg["LOGIN_LIMIT"]), parse(cfg["LOGIN_LIMIT_ACCOUNT"])
    if int(storage.get(key("pair", pair_key())) or 0) >= pair.amount:
        return True
    return not _owner_like() and int(storage.get(key("account", account_key())) or 0) >= account.amount


def gate():
    """Before the password is checked: None when this sign-in may go on, else the 429 page saying
    when the account's next turn opens. A known browser never waits (its own limit applies)."""
    if _known_device():
        return None
    try:
        return _gate(storage())
    except Exception:  # Redis failed just now (the process skips it from here): decide in memory
        try:
            return _gate(storage())
        except Exception:
            return None  # no counters to go by (the address limit still holds)


def _gate(storage):
    """``gate`` on one storage."""
    if not _over(storage):
        return None
    turn = key("turn", account_key())
    # the turn is taken by the request whose increment makes it 1; the others wait
    if int(storage.get(turn) or 0) == 0 and storage.incr(turn, 1) == 1:
        g._took_turn = True
        return None
    wait = max(1, math.ceil(storage.get_expiry(turn) - time.time()))
    return _refuse_for(wait)


def count_failure() -> None:
    """After a wrong password: count it for the account and the address, and, over the limit,
    close the account's turn for the next back-off."""
    if _known_device():
        return
    for _attempt in range(2):  # a Redis that fails just now: once more, in memory (the process skips Redis)
        try:
            return _count_failure(storage())
        except Exception:
            continue


def _count_failure(storage) -> None:
    """``count_failure`` on one storage."""
    cfg = current_app.config
    over = _over(storage) or g.get("_took_turn")
    storage.incr(key("pair", pair_key()), parse(cfg["LOGIN_LIMIT"]).get_expiry())
    storage.incr(key("account", account_key()), parse(cfg["LOGIN_LIMIT_ACCOUNT"]).get_expiry())
    if over or _over(storage):
        cap = float(cfg.get("LOGIN_BACKOFF_MAX", 60))
        level = storage.incr(key("level", account_key()), parse(cfg["LOGIN_LIMIT_ACCOUNT"]).get_expiry())
        turn = key("turn", account_key())
        storage.clear(turn)
        storage.incr(turn, backoff_s(level, cap))


def signed_in_ok() -> None:
    """The right password: the account's back-off starts again from the shortest wait."""
    try:
        counters = storage()
        for kind in ("level", "turn"):
            counters.clear(key(kind, account_key()))
    except Exception:
        pass


def _refuse_for(wait: int):
    """The form again with "try again in N s" (HTTP 429); the refused try is told to the owner too."""
    flash(_("Too many attempts, try again in %(seconds)d s.", seconds=wait), "error")
    if request.endpoint == PASSWORD_ENDPOINT:
        return make_response(render_template("auth/password.html", form=PasswordForm()), 429)
    devices.failed(account_name())
    return make_response(render_template("auth/login.html", form=LoginForm()), 429)


def _failed(response) -> bool:
    return response.status_code == 401


def _refuse(limit: RequestLimit, scope: str = ""):
    """The login form again, saying how long to wait (one message even when several limits are hit)."""
    if not g.get("_login_throttled"):
        g._login_throttled = True
        wait = max(1, math.ceil(limit.reset_at - time.time()))
        flash(_("Too many attempts, try again in %(seconds)d s.", seconds=wait), "error")
        if request.endpoint == LOGIN_ENDPOINT:
            devices.failed(account_name())  # a refused guess is a guess: its owner hears of it too
        if scope == "login-account" and request.endpoint == LOGIN_ENDPOINT:
            flash(_("Many wrong passwords were tried for this account from elsewhere. If it is yours, sign in "
                    "from a browser or network you signed in from before."), "info")
    if request.endpoint == PASSWORD_ENDPOINT:
        return make_response(render_template("auth/password.html", form=PasswordForm()), 429)
    return make_response(render_template("auth/login.html", form=LoginForm()), 429)


def _scope_hooks_to_blueprint(app: Flask, limiter: Limiter, blueprint: str) -> None:
    """Run the limiter's request hooks for the ``auth`` blueprint only, where the limited views are.

    Flask-Limiter registers them for every request; the status poll and the quiz pages would pay
    its bookkeeping (about a tenth of a millisecond) on each request for limits they do not have.
    """
    for hooks in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
        mine = [f for f in hooks.get(None, []) if getattr(f, "__self__", None) is limiter
                or getattr(getattr(f, "func", None), "__self__", None) is limiter
                or limiter in getattr(f, "args", ())]
        if not mine:
            raise RuntimeError("Flask-Limiter's request hooks were not found: cannot scope them to the login pages")
        hooks[None] = [f for f in hooks[None] if f not in mine]
        hooks.setdefault(blueprint, []).extend(mine)


def init_app(app: Flask) -> Limiter:
    """Bind a limiter to ``app`` (one per app: its storage is per instance) and limit the login view."""
    url = app.config.get("REDIS_URL") or ""
    uri = storage_uri(url) if url else "memory://"
    if not url and not app.testing:
        app.logger.warning("REDIS_URL is empty: failed sign-ins are counted in memory, separately in "
                           "each web process (set REDIS_URL to share one count)")
    limiter = Limiter(key_func=address_key, storage_uri=uri, strategy="moving-window", key_prefix=KEY_PREFIX,
                      headers_enabled=False, in_memory_fallback_enabled=True, fail_on_first_breach=False,
                      storage_options={"connection_pool": skipping_pool(url, 1.0)} if url else {})
    limiter.request_filter(lambda: request.endpoint not in (LOGIN_ENDPOINT, PASSWORD_ENDPOINT))
    limiter.init_app(app)
    _scope_hooks_to_blueprint(app, limiter, "auth")
    app.extensions["distgrade_limiter"] = limiter
    # (key, scope, limit, exempt when): see the module docstring
    limits = ((address_key, "login-address", app.config["LOGIN_LIMIT_ADDRESS"], _known_device),
              (device_key, "login-device", app.config["LOGIN_LIMIT"], lambda: not _known_device()))
    for endpoint in (LOGIN_ENDPOINT, PASSWORD_ENDPOINT):
        view = app.view_functions[endpoint]
        # One scope for both pages: guesses on either count towards the same account and address.
        for key_func, scope, rule, exempt in limits:
            view = limiter.limit(rule, key_func=key_func, scope=scope, methods=["POST"], deduct_when=_failed,
                                 exempt_when=exempt, on_breach=functools.partial(_refuse, scope=scope))(view)
        app.view_functions[endpoint] = view
    app.extensions["distgrade_login_storage"] = uri.split("://", 1)[0] + "://"
    return limiter
