"""JWTs checked against the signing keys of REARRANGE_ADMIN_JWKS (docs/api.md, "Signed-in
analysts").

`KeySet` holds the keys of a JWKS, a file or an http(s) URL (fetched with PyJWT's
`PyJWKClient`), by key id. A token naming a key it does not hold, or keys older than the
refresh period, make it read the source again, at most once per cooldown whatever
comes: a flood of tokens with made-up key ids, or a provider that does not answer, costs
one fetch per cooldown, never one per request. A failed fetch keeps the keys held, is
counted, and is logged once until a fetch succeeds again.

`JwtVerifier.claims` checks one token: only the asymmetric algorithms of `ALGORITHMS`
(never `none`, never an HMAC one, whose secret would be the public key: the algorithm
confusion attack), the key its `kid` names, of the type its `alg` needs, the signature,
then `exp`, `nbf`, `iat`, `iss` and `aud`, `sub` required. Every refusal is a
`TokenRefused` with a fixed `reason` (the label of rearrange_auth_failures_total).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from jwt import PyJWK, PyJWKClient

from app import __version__

log = logging.getLogger("rearrange.auth")

# What a token may be signed with: public-key algorithms only. HS256 with the JWKS's public
# key as the secret is how a forged token would pass a verifier that trusted the header.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
# The JWK key type (`kty`) each algorithm's key has
_KEY_TYPE = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
# Why a token was refused: the `reason` of the 401 and of rearrange_auth_failures_total
REASONS = ("malformed", "unsigned", "disallowed_algorithm", "unknown_kid", "key_mismatch",
           "bad_signature", "expired", "not_yet_valid", "wrong_issuer", "wrong_audience",
           "missing_claim", "bad_claim")
MAX_SUBJECT = 200  # a ban's actor is at most this long (app/banlist/bulk.py)


class TokenRefused(Exception):
    """A JWT that is not taken: `reason` one of `REASONS`, `problem` a sentence."""

    def __init__(self, reason: str, problem: str) -> None:
        super().__init__(f"{reason}: {problem}")
        self.reason = reason
        self.problem = problem


class KeysUnavailable(Exception):
    """The keys a token needs could not be fetched: the token can be neither taken nor
    refused (fail closed: the request is not served). `retry_after`: seconds until the
    next fetch may be tried."""

    def __init__(self, problem: str, retry_after: float) -> None:
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Key:
    """One signing key of the set: PyJWT's key, and the `alg` the JWK declares (if any)."""

    jwk: PyJWK
    alg: str | None


def parse_keys(data: object, source: str) -> dict[str, Key]:
    """The public signing keys of a JWKS document, by `kid`. ValueError naming `source`
    for a document that is not a JWKS or holds none; a key of another kind (a symmetric
    `oct` key, an encryption key, one without `kid`) is left out."""
    if not isinstance(data, Mapping) or not isinstance(data.get("keys"), list):
        raise ValueError(f"{source}: not a JWKS (a JSON object with a `keys` list)")
    keys: dict[str, Key] = {}
    for item in data["keys"]:
        if not isinstance(item, Mapping) or item.get("use", "sig") != "sig":
            continue
        kid, kty = item.get("kid"), item.get("kty")
        if not isinstance(kid, str) or not kid or kty not in _KEY_TYPE.values():
            continue
        try:
            jwk = PyJWK(dict(item))
        except (jwt.PyJWKError, jwt.InvalidKeyError) as exc:
            log.warning("auth: %s: key %r left out: %s", source, kid, exc)
            continue
        alg = item.get("alg")
        keys[kid] = Key(jwk, alg if isinstance(alg, str) else None)
    if not keys:
        raise ValueError(f"{source}: no public signing key with a `kid` (RSA, EC or OKP)")
    return keys


def file_fetcher(path: Path) -> Callable[[], dict[str, Key]]:
    """Reads the JWKS file at each call; OSError or ValueError naming it."""
    def fetch() -> dict[str, Key]:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise OSError(f"{path}: cannot read: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: not JSON: {exc}") from None
        return parse_keys(data, str(path))
    return fetch


def url_fetcher(url: str, timeout: float) -> Callable[[], dict[str, Key]]:
    """Fetches the JWKS at `url` with PyJWKClient at each call (no cache of its own: the
    KeySet's is the one); PyJWKClientError or ValueError saying why not."""
    client = PyJWKClient(url, cache_jwk_set=False, timeout=timeout,
                         headers={"User-Agent": f"rearrange/{__version__}"})
    return lambda: parse_keys(client.fetch_data(), url)


class KeySet:
    """The signing keys of one source, fetched again when stale or asked for an unknown
    `kid`, at most once per `cooldown` seconds. `fetched(result)` is told each fetch's
    result (`ok` or `failed`)."""

    def __init__(self, source: str, fetch: Callable[[], dict[str, Key]], refresh: float,
                 cooldown: float, fetched: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self._fetch = fetch
        self._refresh = refresh
        self._cooldown = cooldown
        self._fetched = fetched
        self._clock = clock
        self._keys: dict[str, Key] = {}  # replaced whole, never changed: read without lock
        self._fresh_until = float("-inf")  # the keys are fetched again after this
        self._tried_at: float | None = None  # the last fetch, whatever its result
        self._failure: str | None = None  # why the last fetch failed; None: it did not
        self._lock = threading.Lock()  # one fetch at a time; the others wait for its keys

    def load(self) -> None:
        """Fetch now, raising what the fetch raised (a start checks its JWKS file so)."""
        with self._lock:
            self._keys = self._fetch()
            self._tried_at = self._clock()
            self._fresh_until = self._tried_at + self._refresh
            self._fetched("ok")

    def key(self, kid: str) -> Key:
        """The key `kid` names: TokenRefused (unknown_kid) when the source, read within
        the cooldown, does not hold it; KeysUnavailable when it could not be read."""
        found = self._keys.get(kid)
        if found is not None and self._clock() < self._fresh_until:
            return found
        with self._lock:
            now = self._clock()
            found = self._keys.get(kid)
            due = found is None or now >= self._fresh_until
            if due and (self._tried_at is None or now - self._tried_at >= self._cooldown):
                self._try(now)
                found = self._keys.get(kid)
            if found is not None:
                return found
            if self._failure is not None:  # a new key, or none: it cannot be told
                wait = self._cooldown - (now - (self._tried_at or now))
                raise KeysUnavailable(
                    f"the signing keys cannot be fetched from {self.source} ({self._failure}):"
                    f" the token's key {kid[:64]!r} is not among those held", max(wait, 0.0))
        raise TokenRefused("unknown_kid",
                           f"no key {kid[:64]!r} in the JWKS (REARRANGE_ADMIN_JWKS)")

    def _try(self, now: float) -> None:
        self._tried_at = now
        try:
            keys = self._fetch()
        except (OSError, ValueError, jwt.PyJWTError) as exc:  # unreachable, not a JWKS
            self._fetched("failed")
            if self._failure is None:  # once per outage; the metric counts every one
                log.error("auth: cannot fetch the signing keys from %s: %s; JWTs whose key is "
                          "not held are answered 503 until a fetch succeeds (tried again at "
                          "most every %g s; static tokens still work)", self.source, exc,
                          self._cooldown)
            self._failure = str(exc)
            return
        self._fetched("ok")
        if self._failure is not None:
            log.warning("auth: the signing keys fetched from %s again (%d keys)", self.source,
                        len(keys))
        self._failure = None
        self._keys, self._fresh_until = keys, now + self._refresh


class JwtVerifier:
    """Checks a JWT against `keys`: signed by one of them with an allowed algorithm,
    issued by `issuer` for `audience`, valid now (`leeway` seconds of clock skew)."""

    def __init__(self, keys: KeySet, issuer: str, audience: str, leeway: float) -> None:
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway

    def claims(self, token: str) -> dict[str, Any]:
        """The token's claims, `sub` a usable actor name; TokenRefused saying why not,
        KeysUnavailable when its key cannot be had."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRefused("malformed", f"not a JWT: {exc}") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg.lower() == "none":
            raise TokenRefused("unsigned", "the token is not signed (alg none)")
        if alg not in ALGORITHMS:
            raise TokenRefused("disallowed_algorithm", f"alg {alg[:20]!r} is not accepted "
                               f"(only {', '.join(ALGORITHMS)})")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRefused("malformed", "the token's header names no key (kid)")
        key = self.keys.key(kid)
        _check_key(key, alg, kid)
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.jwk.key, algorithms=[alg], issuer=self.issuer,
                audience=self.audience, leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]})
        except jwt.PyJWTError as exc:
            raise _refusal(exc, self.issuer, self.audience) from None
        _check_subject(claims["sub"])
        return claims


def _check_key(key: Key, alg: str, kid: str) -> None:
    """The key `kid` must be of the type the token's `alg` needs, and of that very
    algorithm when the JWK declares one (an EC key has one per curve)."""
    kty = key.jwk.key_type
    if key.alg is not None and key.alg != alg:
        problem = f"the key {kid!r} is for {key.alg}, the token says {alg}"
    elif _KEY_TYPE[alg[:2]] != kty:
        problem = f"the key {kid!r} is an {kty} key, the token's {alg} needs another"
    elif kty != "RSA" and key.jwk.algorithm_name != alg:  # EC: its curve; OKP: EdDSA
        problem = f"the key {kid!r} signs {key.jwk.algorithm_name}, the token says {alg}"
    else:
        return
    raise TokenRefused("key_mismatch", problem)


def _refusal(exc: jwt.PyJWTError, issuer: str, audience: str) -> TokenRefused:
    """PyJWT's error as a refusal: the reason, and the problem in this service's words."""
    if isinstance(exc, jwt.InvalidSignatureError):
        return TokenRefused("bad_signature", "the signature does not verify with the key "
                            "its kid names")
    if isinstance(exc, jwt.ExpiredSignatureError):
        return TokenRefused("expired", "the token has expired (exp)")
    if isinstance(exc, jwt.ImmatureSignatureError):
        claim = "iat" if "iat" in str(exc) else "nbf"
        return TokenRefused("not_yet_valid", f"the token is not valid yet ({claim})")
    if isinstance(exc, jwt.InvalidIssuerError):
        return TokenRefused("wrong_issuer", f"the token's issuer (iss) is not {issuer}")
    if isinstance(exc, jwt.InvalidAudienceError):
        return TokenRefused("wrong_audience", f"the token's audience (aud) is not {audience}")
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return TokenRefused("missing_claim", f"the token has no {exc.claim} claim")
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return TokenRefused("disallowed_algorithm", str(exc))
    if isinstance(exc, jwt.DecodeError):
        return TokenRefused("malformed", f"not a JWT: {exc}")
    return TokenRefused("bad_claim", str(exc))  # iat not a number, sub not a string, …


def _check_subject(sub: object) -> None:
    if not isinstance(sub, str) or not sub.strip():
        raise TokenRefused("bad_claim", "the token's sub is not a name")
    if len(sub) > MAX_SUBJECT or not sub.isprintable():
        raise TokenRefused("bad_claim", f"the token's sub is not a printable name of at most "
                           f"{MAX_SUBJECT} characters")
