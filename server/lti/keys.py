"""The tool's own RSA key pair, generated once into ``var/lti-tool-key.pem`` (0600), and its
public half as a JWKS (platforms verify the tool's service requests and deep-linking replies
with it). The key never leaves ``var/``; the kid is the RFC 7638 thumbprint of the public key."""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwcrypto.jwk import JWK

KEY_FILE = "lti-tool-key.pem"


def key_path(var_dir: str | os.PathLike) -> Path:
    return Path(var_dir) / KEY_FILE


def private_pem(var_dir: str | os.PathLike) -> str:
    """The tool's private key (PEM), generated on first use with mode 0600; a key file others can
    read is refused, as for the session secret."""
    path = key_path(var_dir)
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
    if path.stat().st_mode & 0o077:
        raise RuntimeError(f"{path} is readable by others: chmod 600 it")
    return path.read_text()


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
    """``{"keys": [public JWK]}`` for ``/lti/jwks.json``."""
    return {"keys": [_public(private_pem(var_dir))[1]]}


def kid(var_dir: str | os.PathLike) -> str:
    return _public(private_pem(var_dir))[1]["kid"]
