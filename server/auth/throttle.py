"""Sign-in throttling: failed sign-ins are counted per account and per address (Flask-Limiter).

Only failures count (``deduct_when``: the login view answers 401), in a moving one-minute window;
when the account's count reaches ``LOGIN_LIMIT`` (default 5 per minute), or the address's reaches
``LOGIN_LIMIT_ADDRESS`` (default 30: a lab shares one address), the next sign-in is refused
before the password is even checked (the right one too, so guessing stays slow), with the form
shown again and "too many attempts, try again in N s" (HTTP 429).

The counters live in the service's Redis (``REDIS_URL``, the embedded one under ``./distgrade up``),
so every gunicorn process shares them. Without a Redis URL (tests, a bare ``flask run``) they are
kept in memory, per process, and the app says so in its log; if Redis goes away while the service
runs, Flask-Limiter falls back to memory the same way and returns to Redis when it is back.
"""
from __future__ import annotations

import math
import time

from flask import Flask, flash, g, make_response, render_template, request
from flask_babel import gettext as _
from flask_limiter import Limiter, RequestLimit
from flask_limiter.util import get_remote_address

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


def _failed(response) -> bool:
    return response.status_code == 401


def _refuse(limit: RequestLimit):
    """The login form again, saying how long to wait (one message even when both limits are hit)."""
    from server.auth.views import LoginForm, PasswordForm

    if not g.get("_login_throttled"):
        g._login_throttled = True
        wait = max(1, math.ceil(limit.reset_at - time.time()))
        flash(_("Too many attempts, try again in %(seconds)d s.", seconds=wait), "error")
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
                      storage_options={"socket_connect_timeout": 1, "socket_timeout": 1})
    limiter.request_filter(lambda: request.endpoint not in (LOGIN_ENDPOINT, PASSWORD_ENDPOINT))
    limiter.init_app(app)
    _scope_hooks_to_blueprint(app, limiter, "auth")
    limits = ((account_key, "login-account", app.config["LOGIN_LIMIT"]),
              (address_key, "login-address", app.config["LOGIN_LIMIT_ADDRESS"]))
    for endpoint in (LOGIN_ENDPOINT, PASSWORD_ENDPOINT):
        view = app.view_functions[endpoint]
        # One scope for both pages: guesses on either count towards the same account and address.
        for key_func, scope, rule in limits:
            view = limiter.limit(rule, key_func=key_func, scope=scope, methods=["POST"], deduct_when=_failed,
                                 on_breach=_refuse)(view)
        app.view_functions[endpoint] = view
    app.extensions["distgrade_login_storage"] = uri.split("://", 1)[0] + "://"
    return limiter
