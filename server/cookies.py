"""Cookies that work inside another site's frame. An LMS shows distgrade in an iframe (Canvas runs
deep linking and often launches there): a ``SameSite=Lax`` cookie is not sent in a cross-site frame,
and where browsers block third-party cookies only a ``Partitioned`` one (CHIPS, kept per top-level
site) survives. So a request that arrived over HTTPS (directly, or through a proxy that
``TRUSTED_PROXIES`` believes, or with ``HTTPS`` set) gets ``SameSite=None; Secure; Partitioned``;
plain HTTP (a laptop, the tests) keeps ``Lax``. Forms carry CSRF tokens either way, which is what
guards them once the cookie also travels cross-site."""
from __future__ import annotations

from flask import Flask, current_app, has_request_context, request
from flask.sessions import SecureCookieSessionInterface


def secure_request() -> bool:
    """Whether this request reached distgrade over HTTPS (as the proxy tells, if believed)."""
    return has_request_context() and (request.is_secure or bool(current_app.config.get("HTTPS")))


class FrameableSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session, with the cookie's attributes chosen per request."""

    def get_cookie_samesite(self, app: Flask) -> str | None:
        return "None" if secure_request() else app.config["SESSION_COOKIE_SAMESITE"]

    def get_cookie_secure(self, app: Flask) -> bool:
        return secure_request() or bool(app.config["SESSION_COOKIE_SECURE"])

    def get_cookie_partitioned(self, app: Flask) -> bool:
        return secure_request() or bool(app.config.get("SESSION_COOKIE_PARTITIONED"))
