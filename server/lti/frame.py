"""The LTI launch inside the LMS's frame, where cookies may not come back.

The OIDC state binds the platform's answer (the id_token posted to ``/lti/launch``) to the browser
that started the login, so nobody can make a victim's browser finish someone else's launch. It
normally travels in PyLTI1p3's state cookie, which over HTTPS is ``SameSite=None; Secure;
Partitioned`` here (``ToolCookies``), so a cross-site frame keeps it. Where the frame keeps no
cookies at all:

* the platform offers 1EdTech's client-side postMessage storage (``lti_storage_target`` on the
  login): the login page puts the state into the platform's window, and the launch page reads it
  back from there. Both messages go to, and are only accepted from, the origin of the platform's
  registered OIDC authorisation URL, so another site that frames distgrade cannot answer them; the
  launch page's confirmation counts only when the browser says it came from distgrade's own origin
  (``Sec-Fetch-Site``/``Origin``, which a page cannot forge), and each stored state confirms once;
* it does not: the login page sees that its test cookie did not stick and offers a new window,
  where the same login runs as a first-party page with cookies.

Launch state in Redis is keyed by the (random, single-use) state or launch id only, not by a cookie:
that cookie is exactly what a blocked frame lacks.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from flask import request
from pylti1p3.contrib.flask import FlaskCacheDataStorage, FlaskCookieService, FlaskRequest

from server.cookies import secure_request
from server.grading.queue import redis_conn

LOGIN_TTL_S = 600  # the platform's authorisation and the launch follow within seconds; 10 min is generous
# what a platform sends to start a login: kept to start the same login again in a new window
LOGIN_PARAMS = ("iss", "login_hint", "lti_message_hint", "client_id", "target_link_uri", "lti_deployment_id")


class RedisCache:
    """The get/set cache PyLTI1p3's launch data storage expects, over the service's Redis (JSON values)."""

    prefix = "distgrade:lti:"

    def get(self, key: str) -> Any:
        raw = redis_conn().get(self.prefix + key)
        return None if raw is None else json.loads(raw)

    def set(self, key: str, value: Any, exp: int | None = None) -> None:
        redis_conn().set(self.prefix + key, json.dumps(value), ex=exp or 3600)

    def delete(self, key: str) -> None:
        redis_conn().delete(self.prefix + key)

    def take(self, key: str) -> Any:
        """Read and delete in one step: a value that may be used once."""
        raw = redis_conn().getdel(self.prefix + key)
        return None if raw is None else json.loads(raw)


class Storage(FlaskCacheDataStorage):
    """PyLTI1p3's cache storage without its session cookie: over HTTPS it would key the nonce and the
    launch by a cookie that a blocked frame never sends back. The keys are random and single-use."""

    def get_session_cookie_name(self) -> None:
        return None


class ToolRequest(FlaskRequest):
    """The request as PyLTI1p3 sees it, secure when distgrade is served over HTTPS (``secure_request``)."""

    def __init__(self) -> None:
        super().__init__(request_is_secure=secure_request())


class ToolCookies(FlaskCookieService):
    """PyLTI1p3's state cookie, partitioned as well over HTTPS (kept where third-party cookies are not)."""

    def update_response(self, response) -> None:
        secure = bool(self._request.is_secure())
        for key, data in self._cookie_data_to_set.items():
            response.set_cookie(key, data["value"], max_age=data["exp"], path="/", httponly=True, secure=secure,
                                samesite="None" if secure else "Lax", partitioned=secure)


def storage() -> Storage:
    return Storage(RedisCache())


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL: where postMessage goes and is accepted from."""
    parts = urlparse(url)
    return f"{parts.scheme}://{parts.netloc}"


def remember_login(state: str, target: str, platform_origin: str) -> dict[str, str]:
    """Keep what this login needs later (the storage target, the platform's origin, the login's
    parameters for a new window) under its state; returns the parameters."""
    params = {k: str(request.values[k])[:2000] for k in LOGIN_PARAMS if request.values.get(k)}
    RedisCache().set("login:" + state, {"params": params, "target": target[:200], "origin": platform_origin},
                     LOGIN_TTL_S)
    return params


def login_record(state: str) -> dict[str, Any] | None:
    return RedisCache().get("login:" + state) if state else None


def confirmed_by_platform_storage(state: str) -> bool:
    """The tool's own launch page read this state back from the platform's storage and says so:
    believed only from distgrade's own origin, once per state."""
    if request.form.get("lti_storage_checked") != "1" or not state:
        return False
    site = request.headers.get("Sec-Fetch-Site")
    own = site == "same-origin" if site else request.headers.get("Origin") == origin(request.host_url)
    record = login_record(state)
    if not own or not record or not record.get("target"):
        return False
    return RedisCache().take("login:" + state) is not None
