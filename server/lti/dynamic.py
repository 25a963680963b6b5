"""LTI Dynamic Registration (1EdTech; Canvas and Moodle offer it). An instructor makes a one-time
registration URL on the platforms page (``/lti/dynamic/<token>``, a day long) and gives it to the LMS.
The LMS opens it with ``openid_configuration`` (and a ``registration_token``); distgrade reads the
platform's configuration, which must live under the issuer it names, posts its own configuration to
the platform's registration endpoint, stores the registration the platform answers with (client id,
deployment), and tells the LMS window it is done (``org.imsglobal.lti.close``). Only the holder of an
unused token gets this far, so no stranger can register an LMS of their own."""
from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlparse

import requests
from flask import abort, render_template, request, url_for
from flask_login import current_user

from server.extensions import db
from server.lti import registry, tool
from server.lti.views import bp
from server.lti.frame import RedisCache
from server.lti.models import LtiPlatform

TOKEN_TTL_S = 24 * 3600
TOOL_CONF = "https://purl.imsglobal.org/spec/lti-tool-configuration"


def new_url() -> str:
    """A one-time registration URL for the LMS (made by a signed-in instructor)."""
    token = secrets.token_urlsafe(24)
    RedisCache().set("dynamic:" + token, {"by": current_user.id}, TOKEN_TTL_S)
    return url_for("lti.dynamic_register", token=token, _external=True)


def _get_json(url: str, token: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = requests.get(url, headers=headers, timeout=10)
    resp.raise_for_status()
    data = resp.json()
    if not isinstance(data, dict):
        raise ValueError("the configuration is not a JSON object")
    return data


def _tool_registration() -> dict[str, Any]:
    """What distgrade tells the platform about itself (OpenID Connect client metadata + LTI's part)."""
    launch = url_for("lti.launch", _external=True)
    return {"application_type": "web", "response_types": ["id_token"], "grant_types": ["implicit", "client_credentials"],
            "initiate_login_uri": url_for("lti.login", _external=True), "redirect_uris": [launch],
            "client_name": "distgrade", "jwks_uri": url_for("lti.jwks", _external=True),
            "token_endpoint_auth_method": "private_key_jwt", "scope": " ".join(registry.SCOPES),
            TOOL_CONF: {"domain": urlparse(launch).netloc, "target_link_uri": launch,
                        "claims": ["iss", "sub", "name", "email"],
                        "messages": [{"type": "LtiDeepLinkingRequest", "target_link_uri": launch,
                                      "placements": ["link_selection", "assignment_selection"]}]}}


def register(config_url: str, token: str):
    """Read the platform's configuration, register at its endpoint, store the answer; returns the row."""
    if not config_url.startswith(("https://", "http://")):
        raise ValueError("openid_configuration is not an http(s) URL")
    config = _get_json(config_url, token)
    issuer = str(config.get("issuer") or "")
    if not issuer or not config_url.startswith(issuer.rstrip("/") + "/"):
        raise ValueError("the configuration is not under the issuer it names")
    endpoints = [str(config.get(k) or "") for k in ("authorization_endpoint", "token_endpoint", "jwks_uri",
                                                    "registration_endpoint")]
    if not all(e.startswith(("https://", "http://")) for e in endpoints):
        raise ValueError("the configuration lacks an endpoint")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = requests.post(endpoints[3], json=_tool_registration(), headers=headers, timeout=10)
    resp.raise_for_status()
    answer = resp.json()
    client_id = str(answer.get("client_id") or "")
    deployment = str((answer.get(TOOL_CONF) or {}).get("deployment_id") or "")
    if not client_id:
        raise ValueError("the platform answered without a client id")
    known = db.session.scalar(db.select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                           LtiPlatform.client_id == client_id))
    deployments = set(known.deployment_ids or []) if known else set()  # registering again adds, never drops
    return tool.register_platform(issuer, client_id, endpoints[0], endpoints[1], endpoints[2],
                                  sorted(deployments | ({deployment} if deployment else set())),
                                  deployment_required=False)


@bp.route("/dynamic/<token>")
def dynamic_register(token: str):
    """The LMS opens this with its ``openid_configuration``; the token is used once, on success."""
    cache = RedisCache()
    if not cache.get("dynamic:" + token):
        abort(404)
    try:
        row = register(str(request.args.get("openid_configuration", "")), str(request.args.get("registration_token", "")))
    except (requests.RequestException, ValueError, tool.LaunchRefused) as err:
        return render_template("lti/dynamic_done.html", error=str(getattr(err, "detail", "") or err)[:300]), 400
    cache.delete("dynamic:" + token)
    return render_template("lti/dynamic_done.html", platform=row, error="")
