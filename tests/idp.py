"""A small identity provider for the tests: real keys (cryptography), tokens signed by
PyJWT, its JWKS as a file or served over HTTP from a thread (http.server), as an OIDC
provider's `jwks_uri` serves it."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

ISSUER = "https://idp.test/realms/tns"
AUDIENCE = "rearrange-admin"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def ed_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def public_jwk(private: Any, kid: str, alg: str | None = None) -> dict[str, Any]:
    """The public half of `private` as a JWK, as a provider publishes it."""
    public = private.public_key()
    if isinstance(private, rsa.RSAPrivateKey):
        jwk = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(private, ec.EllipticCurvePrivateKey):
        jwk = ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
    jwk.update({"kid": kid, "use": "sig"})
    if alg is not None:
        jwk["alg"] = alg
    return jwk


def claims(sub: str = "alice@tns", scope: str | None = "rearrange:write",
           **extra: Any) -> dict[str, Any]:
    """A provider's access token claims: valid for 5 minutes from now."""
    now = int(time.time())
    found = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "nbf": now,
             "exp": now + 300, "scope": scope}
    if scope is None:
        del found["scope"]
    found.update(extra)
    return {k: v for k, v in found.items() if v is not None}


def mint(private: Any, kid: str | None, alg: str = "RS256", **claim: Any) -> str:
    """A token signed by `private` whose header names `kid`."""
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(claims(**claim), private, algorithm=alg, headers=headers)


def unsigned(kid: str, **claim: Any) -> str:
    """`alg: none`: a token anyone can write."""
    return ".".join([_b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid})),
                     _b64(json.dumps(claims(**claim))), ""])


def hs256_with_public_key(private: Any, kid: str, **claim: Any) -> str:
    """The algorithm confusion forgery: HS256 keyed with the public key's PEM, which the
    attacker has (PyJWT itself refuses to make one, so it is made by hand)."""
    secret = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signing = ".".join([_b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid})),
                        _b64(json.dumps(claims(**claim)))])
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return signing + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def write_jwks(path: Path, *jwks: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"keys": list(jwks)}))
    return path


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


class JwksServer:
    """Serves `keys` as a JWKS at /jwks on a free local port, counting its fetches;
    `failing` makes it answer 500, as a provider having trouble does."""

    def __init__(self, *jwks: dict[str, Any]) -> None:
        self.keys = list(jwks)
        self.fetches = 0
        self.failing = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.fetches += 1
                status, body = ((500, b"oops") if server.failing
                                else (200, json.dumps({"keys": server.keys}).encode()))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/jwks"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> JwksServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.http.shutdown()
        self.http.server_close()
