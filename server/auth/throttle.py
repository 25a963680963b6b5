"""Sign-in throttling: failed sign-ins are counted so that the guesser is slowed, not the owner.

Only failures count (``deduct_when``: the view answers 401), in moving windows (Flask-Limiter):

* per account *and* address, ``LOGIN_LIMIT`` (default 5 per minute): one guesser at one address;
* per address, ``LOGIN_LIMIT_ADDRESS`` (default 30: a lab shares one address);
* per account from anywhere, ``LOGIN_LIMIT_ACCOUNT`` (default 30 per hour, looser): guessing from
  many addresses. An address the owner signed in from before passes it;
* a browser the owner signed in from before (``devices``: a signed cookie) passes the three
  above and has a bucket of its own, ``LOGIN_LIMIT`` per account and device.

So a classmate who types five wrong passwords for someone's username throttles only themselves:
the owner at home, or beside them in the lab on their own browser, still signs in. When a limit
is reached, the next sign-in is refused before the password is even checked (the right one too,
so guessing stays slow), with the form shown again and "too many attempts, try again in N s"
(HTTP 429). The owner is told at their next sign-in how many wrong passwords were tried.

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

from flask import Flask, flash, g, make_response, render_template, request
from flask_babel import gettext as _
from flask_limiter import Limiter, RequestLimit
from flask_limiter.util import get_remote_address

from server.auth import devices
from server.redis_skip import skipping_pool

LOGIN_ENDPOINT = "auth.login"
PASSWORD_ENDPOINT = "auth.password"  # a wrong current password counts like a failed sign-in
KEY_PREFIX = "distgrade-login"


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


def _failed(response) -> bool:
    return response.status_code == 401


def _refuse(limit: RequestLimit, scope: str = ""):
    """The login form again, saying how long to wait (one message even when several limits are hit)."""
    from server.auth.views import LoginForm, PasswordForm

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
    limits = ((pair_key, "login-pair", app.config["LOGIN_LIMIT"], _known_device),
              (address_key, "login-address", app.config["LOGIN_LIMIT_ADDRESS"], _known_device),
              (account_key, "login-account", app.config["LOGIN_LIMIT_ACCOUNT"], _owner_like),
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
