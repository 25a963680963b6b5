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
from urllib.parse import parse_qs, urlencode, urlparse

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
        self.tool_jwks: dict = {}  # the tool's public key, pasted at registration as an LMS allows
        self.tokens: set[str] = set()
        self.lineitems: dict[str, dict] = {}  # id (url) -> line item
        self.scores: dict[str, dict[str, dict]] = {}  # line item url -> user id -> last score posted
        self.members: list[dict] = []  # the course roster NRPS returns
        self.fail_scores = 0  # answer this many score posts with 503 (an LMS outage)
        self.placed: list[dict] = []
        self.lineitem = ""  # the AGS claim's lineitem: the launched link's own grade column, if it has one
        self.accept_multiple: bool | None = None  # deep linking's accept_multiple (None: not sent)
        self.registrations: list[dict] = []  # what tools sent to the Dynamic Registration endpoint
        self.registration_token = "reg-token-1"
        self.next_deep_link = False  # the next authorisation answers with a deep-linking request  # content items the tool returned by deep linking
        self.lock = threading.Lock()
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

    def deep_link_claims(self, nonce: str) -> dict[str, Any]:
        """An LtiDeepLinkingRequest: where the tool's reply goes and what it may place."""
        return self.claims(nonce, **{
            CLAIM + "message_type": "LtiDeepLinkingRequest", CLAIM + "resource_link": None,
            "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings": {
                "deep_link_return_url": self.url + "/deeplink/return", "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["iframe", "window"], "data": "opaque-42",
                **({} if self.accept_multiple is None else {"accept_multiple": self.accept_multiple})}})

    def claims(self, nonce: str, **over: Any) -> dict[str, Any]:
        now = int(time.time())
        body = {"iss": self.issuer, "aud": self.client_id, "sub": self.user.get("sub", "u-1"), "iat": now,
                "exp": now + 300, "nonce": nonce, "name": self.user.get("name", ""), "email": self.user.get("email", ""),
                CLAIM + "deployment_id": self.deployment, CLAIM + "message_type": "LtiResourceLinkRequest",
                CLAIM + "version": "1.3.0", CLAIM + "roles": self.user.get("roles") or [ROLE + self.user.get("role", "Learner")],
                CLAIM + "context": self.context, CLAIM + "resource_link": {"id": "rl-1"},
                CLAIM + "target_link_uri": "", CLAIM + "custom": dict(self.custom),
                "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                    "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
                              "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
                              "https://purl.imsglobal.org/spec/lti-ags/scope/score"],
                    "lineitems": f"{self.url}/ctx/{self.context['id']}/lineitems",
                    **({"lineitem": self.lineitem} if self.lineitem else {})},
                "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                    "context_memberships_url": f"{self.url}/ctx/{self.context['id']}/memberships",
                    "service_versions": ["2.0"]}}
        body.update(over)
        return {k: v for k, v in body.items() if v is not None}

    def course_page(self, tool: str, storage: bool) -> str:
        """A course page with the tool in an iframe, launched by third-party initiated login; with
        ``storage`` it offers 1EdTech's client-side postMessage storage (``lti_storage_target``),
        answering put_data/get_data only for the tool's origin. ``window.ltiLog`` lists what it was asked."""
        query = {"iss": self.issuer, "login_hint": "hint", "client_id": self.client_id,
                 "target_link_uri": tool + "/lti/launch"}
        if storage:
            query["lti_storage_target"] = "_parent"
        origin = "{0.scheme}://{0.netloc}".format(urlparse(tool))
        return (f'<!doctype html><title>LMS course</title><h1>LMS course</h1>'
                f'<iframe id="tool" name="tool" style="width:1100px;height:800px" '
                f'src="{html.escape(tool + "/lti/login?" + urlencode(query))}"></iframe><script>'
                'window.ltiLog = []; const store = {};'
                'window.addEventListener("message", function (e) {'
                f'  if (e.origin !== {json.dumps(origin)} || !e.data) return;'
                '  const d = e.data; window.ltiLog.push(d.subject); let reply = null;'
                '  if (d.subject === "lti.put_data") { store[d.key] = d.value;'
                '    reply = {subject: "lti.put_data.response", message_id: d.message_id, key: d.key, value: d.value}; }'
                '  if (d.subject === "lti.get_data")'
                '    reply = {subject: "lti.get_data.response", message_id: d.message_id, key: d.key, value: store[d.key]};'
                '  if (reply) e.source.postMessage(reply, e.origin);'
                '});</script>')

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
                if url.path == "/.well-known/openid-configuration":  # LTI Dynamic Registration's platform side
                    return self._json(200, {
                        "issuer": platform.issuer, "authorization_endpoint": platform.url + "/auth",
                        "token_endpoint": platform.url + "/token", "jwks_uri": platform.url + "/jwks",
                        "registration_endpoint": platform.url + "/register",
                        "scopes_supported": ["openid"], "response_types_supported": ["id_token"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                        "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                            "product_family_code": "distgrade-tests", "version": "1",
                            "messages_supported": [{"type": "LtiResourceLinkRequest"}, {"type": "LtiDeepLinkingRequest"}]}})
                if url.path == "/course":  # the LMS's course page framing the tool, with its platform storage
                    q = {k: v[0] for k, v in parse_qs(url.query).items()}
                    return self._send(200, platform.course_page(q["tool"], q.get("storage") == "1").encode(), "text/html")
                if url.path == "/auth":
                    q = {k: v[0] for k, v in parse_qs(url.query).items()}
                    if q.get("client_id") != platform.client_id or q.get("response_mode") != "form_post":
                        return self._send(400, b"bad authorisation request", "text/plain")
                    body = (platform.deep_link_claims(q["nonce"]) if platform.next_deep_link
                            else platform.claims(q["nonce"]))
                    platform.next_deep_link = False
                    token = platform.sign(body)
                    page = (f'<form method="post" action="{html.escape(q["redirect_uri"])}">'
                            f'<input name="id_token" value="{token}"><input name="state" value="{html.escape(q["state"])}">'
                            "</form><script>document.forms[0].submit()</script>")  # form_post, as an LMS does
                    return self._send(200, page.encode(), "text/html")
                if not self._authorised():
                    return self._send(401, b"no token", "text/plain")
                if url.path.endswith("/lineitems"):
                    items = list(platform.lineitems.values())
                    q = {k: v[0] for k, v in parse_qs(url.query).items()}
                    for key in ("tag", "resource_id"):
                        if key in q:
                            items = [i for i in items if i.get({"tag": "tag", "resource_id": "resourceId"}[key]) == q[key]]
                    return self._json(200, items)
                if url.path.endswith("/results"):
                    line = platform.url + url.path.removesuffix("/results")
                    return self._json(200, [{"userId": u, "resultScore": s["scoreGiven"], "resultMaximum": s["scoreMaximum"]}
                                            for u, s in platform.scores.get(line, {}).items()])
                if url.path.endswith("/memberships"):
                    return self._json(200, {"id": platform.url + url.path, "context": platform.context,
                                            "members": platform.members})
                self._send(404, b"", "text/plain")

            def _json(self, code: int, body: Any) -> None:
                self._send(code, json.dumps(body).encode(), "application/json")

            def _authorised(self) -> bool:
                auth = self.headers.get("Authorization", "")
                return auth.startswith("Bearer ") and auth[7:] in platform.tokens

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_POST(self) -> None:
                url = urlparse(self.path)
                if url.path == "/deeplink/return":  # the tool's signed LtiDeepLinkingResponse
                    form = {k: v[0] for k, v in parse_qs(self._body().decode()).items()}
                    try:
                        key = RSAAlgorithm.from_jwk(json.dumps(platform.tool_jwks["keys"][0]))
                        claims = jwt.decode(form.get("JWT", ""), key, algorithms=["RS256"], audience=platform.issuer)
                    except (jwt.InvalidTokenError, KeyError, IndexError) as err:
                        return self._json(401, {"error": str(err)})
                    items = claims.get("https://purl.imsglobal.org/spec/lti-dl/claim/content_items", [])
                    with platform.lock:
                        platform.placed.extend(items)
                        for it in items:  # an LMS makes the declared line item with the link
                            li = it.get("lineItem")
                            if li:
                                line_id = f"{platform.url}/ctx/{platform.context['id']}/lineitems/{len(platform.lineitems) + 1}"
                                platform.lineitems[line_id] = {**li, "id": line_id}
                    return self._json(200, {"placed": len(items)})
                if url.path == "/register":
                    if self.headers.get("Authorization", "") != "Bearer " + platform.registration_token:
                        return self._json(401, {"error": "invalid_token"})
                    body = json.loads(self._body() or b"{}")
                    platform.registrations.append(body)
                    tool_conf = body.get("https://purl.imsglobal.org/spec/lti-tool-configuration", {})
                    return self._json(200, {**body, "client_id": platform.client_id,
                                            "https://purl.imsglobal.org/spec/lti-tool-configuration": {
                                                **tool_conf, "deployment_id": platform.deployment}})
                if url.path == "/token":  # OAuth2 client credentials with a JWT client assertion (RFC 7523)
                    form = {k: v[0] for k, v in parse_qs(self._body().decode()).items()}
                    try:
                        key = RSAAlgorithm.from_jwk(json.dumps(platform.tool_jwks["keys"][0]))
                        claims = jwt.decode(form.get("client_assertion", ""), key, algorithms=["RS256"],
                                            audience=platform.url + "/token")
                    except (jwt.InvalidTokenError, KeyError, IndexError) as err:
                        return self._json(401, {"error": "invalid_client", "detail": str(err)})
                    if claims.get("iss") != platform.client_id:
                        return self._json(401, {"error": "invalid_client"})
                    token = uuid.uuid4().hex
                    platform.tokens.add(token)
                    return self._json(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})
                if not self._authorised():
                    return self._send(401, b"no token", "text/plain")
                body = json.loads(self._body() or b"{}")
                if url.path.endswith("/lineitems"):
                    with platform.lock:
                        line_id = f"{platform.url}{url.path}/{len(platform.lineitems) + 1}"
                        platform.lineitems[line_id] = {**body, "id": line_id}
                    return self._json(201, platform.lineitems[line_id])
                if url.path.endswith("/scores"):
                    line = platform.url + url.path.removesuffix("/scores")
                    if line not in platform.lineitems:
                        return self._send(404, b"no such line item", "text/plain")
                    with platform.lock:
                        if platform.fail_scores > 0:
                            platform.fail_scores -= 1
                            return self._send(503, b"maintenance", "text/plain")
                        platform.scores.setdefault(line, {})[body["userId"]] = body
                    return self._send(204, b"", "text/plain")
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
