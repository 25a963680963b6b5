"""A small LTI 1.3 platform for the tests, on the same standards as an LMS: RS256 id_tokens with a
kid from its JWKS, an OIDC authorisation endpoint answering with an auto-posting form (form_post),
over real HTTP on 127.0.0.1. Written for these tests from the IMS LTI 1.3 core spec; no LMS code."""
from __future__ import annotations

import html
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#"


class Platform:
    """The platform: its key, its registered tool (client id, deployment) and its HTTP server."""

    def __init__(self, client_id: str = "distgrade-client", deployment: str = "dep-1"):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "platform-key-1"
        self.client_id, self.deployment = client_id, deployment
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.issuer = self.url
        self.user: dict[str, Any] = {}  # who the next authorisation is for (the "signed-in LMS user")
        self.context = {"id": "ctx-42", "label": "DDP101", "title": "Distributed training"}
        self.custom: dict[str, str] = {}
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> "Platform":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def jwks(self) -> dict:
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid=self.kid, alg="RS256", use="sig")
        return {"keys": [jwk]}

    def claims(self, nonce: str, **over: Any) -> dict[str, Any]:
        now = int(time.time())
        body = {"iss": self.issuer, "aud": self.client_id, "sub": self.user.get("sub", "u-1"), "iat": now,
                "exp": now + 300, "nonce": nonce, "name": self.user.get("name", ""), "email": self.user.get("email", ""),
                CLAIM + "deployment_id": self.deployment, CLAIM + "message_type": "LtiResourceLinkRequest",
                CLAIM + "version": "1.3.0", CLAIM + "roles": [ROLE + self.user.get("role", "Learner")],
                CLAIM + "context": self.context, CLAIM + "resource_link": {"id": "rl-1"},
                CLAIM + "target_link_uri": "", CLAIM + "custom": dict(self.custom)}
        body.update(over)
        return {k: v for k, v in body.items() if v is not None}

    def sign(self, body: dict[str, Any], key=None, kid: str | None = None) -> str:
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def _handler(self):
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet test output
                pass

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path == "/jwks":
                    return self._send(200, json.dumps(platform.jwks()).encode(), "application/json")
                if url.path == "/auth":
                    q = {k: v[0] for k, v in parse_qs(url.query).items()}
                    if q.get("client_id") != platform.client_id or q.get("response_mode") != "form_post":
                        return self._send(400, b"bad authorisation request", "text/plain")
                    token = platform.sign(platform.claims(q["nonce"]))
                    page = (f'<form method="post" action="{html.escape(q["redirect_uri"])}">'
                            f'<input name="id_token" value="{token}"><input name="state" value="{html.escape(q["state"])}">'
                            "</form>")
                    return self._send(200, page.encode(), "text/html")
                self._send(404, b"", "text/plain")

        return Handler


def form_fields(page: str) -> dict[str, str]:
    """The hidden inputs of the platform's auto-posting form."""
    out = {}
    for part in page.split("<input ")[1:]:
        name = part.split('name="')[1].split('"')[0]
        out[name] = html.unescape(part.split('value="')[1].split('"')[0])
    return out


def new_nonce() -> str:
    return uuid.uuid4().hex
