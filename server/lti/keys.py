"""The tool's own RSA key pair, generated once into ``var/lti-tool-key.pem`` (0600), and its
public half as a JWKS (platforms verify the tool's service requests and deep-linking replies
with it). The key never leaves ``var/``; the kid is the RFC 7638 thumbprint of the public key.

``rotate`` makes a new key pair the one that signs; the old public key stays in the JWKS until
its ``until`` (``var/lti-retired-keys.json``), so a platform that cached the set, or holds a
token signed a moment ago, still verifies. Its private half is gone at once."""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwcrypto.jwk import JWK

KEY_FILE = "lti-tool-key.pem"
RETIRED_FILE = "lti-retired-keys.json"


def key_path(var_dir: str | os.PathLike) -> Path:
    return Path(var_dir) / KEY_FILE


def private_pem(var_dir: str | os.PathLike) -> str:
    """The tool's private key (PEM), generated on first use with mode 0600; a key file others can
    read is refused, as for the session secret."""
    path = key_path(var_dir)
    if not path.exists():
        _write_new_key(path, path)
    if path.stat().st_mode & 0o077:
        raise RuntimeError(f"{path} is readable by others: chmod 600 it")
    return path.read_text()


def _write_new_key(path: Path, create: Path) -> None:
    """A fresh private key written 0600 into ``create`` (O_EXCL), then moved over ``path`` if they differ."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(create, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    if create != path:
        os.replace(create, path)


def _retired(var_dir: str | os.PathLike) -> list[dict]:
    path = Path(var_dir) / RETIRED_FILE
    return json.loads(path.read_text()) if path.exists() else []


def rotate(var_dir: str | os.PathLike, keep_days: float) -> tuple[str, str]:
    """A new signing key; the old public key stays published for ``keep_days``. Returns (old kid, new kid)."""
    old = _public(private_pem(var_dir))[1]
    until = (datetime.now(timezone.utc) + timedelta(days=keep_days)).replace(tzinfo=None).isoformat()
    rows = [r for r in _retired(var_dir) if r["jwk"]["kid"] != old["kid"]] + [{"jwk": old, "until": until}]
    tmp = Path(var_dir) / (RETIRED_FILE + ".tmp")
    tmp.write_text(json.dumps(rows))
    os.replace(tmp, Path(var_dir) / RETIRED_FILE)
    new_file = Path(var_dir) / (KEY_FILE + ".new")
    new_file.unlink(missing_ok=True)
    _write_new_key(key_path(var_dir), new_file)
    return old["kid"], kid(var_dir)


@lru_cache(maxsize=8)
def _public(pem: str) -> tuple[str, dict]:
    key = JWK.from_pem(pem.encode())
    public = json.loads(key.export_public())
    public.update(alg="RS256", use="sig", kid=key.thumbprint())
    pub_pem = key.export_to_pem().decode()
    return pub_pem, public


def public_pem(var_dir: str | os.PathLike) -> str:
    return _public(private_pem(var_dir))[0]


def jwks(var_dir: str | os.PathLike) -> dict:
    """``{"keys": [the signing key's public JWK, then retired ones not yet past their time]}``."""
    now = datetime.now(timezone.utc).replace(tzinfo=None).isoformat()
    current = _public(private_pem(var_dir))[1]
    return {"keys": [current] + [r["jwk"] for r in _retired(var_dir)
                                 if r["until"] > now and r["jwk"]["kid"] != current["kid"]]}


def kid(var_dir: str | os.PathLike) -> str:
    return _public(private_pem(var_dir))[1]["kid"]
