"""Who holds a bearer token, and what they may do: the one check every route, the QA
headers of `/v1/rerank` and the data port make.

A token is one of REARRANGE_ADMIN_TOKENS (the static tokens, compared in constant time),
or, with REARRANGE_ADMIN_JWKS set, a JWT of the identity provider (app/api/jwks.py): its
`sub` is the actor, its `scope` (or `scp`) the rights. A static write token has the
rights `read` and `write`, a read token `read`, an approve token all three; a JWT the
rights its scopes `rearrange:read`, `rearrange:write` (which implies read) and
`rearrange:approve` name.

Refusals are HTTPExceptions rendered by app/api/errors.py: 401 without a token or with
one that is not taken (for a JWT, `reason` says why, and `WWW-Authenticate` carries
`error="invalid_token"` as RFC 6750 says), 403 for a token without the right, 503 when
the keys a JWT needs cannot be fetched. Each is counted by reason in
rearrange_auth_failures_total.
"""
from __future__ import annotations

import hmac
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool

from app.api.jwks import (
    REASONS,
    JwtVerifier,
    KeySet,
    KeysUnavailable,
    TokenRefused,
    file_fetcher,
    url_fetcher,
)
from app.config.settings import Settings
from app.errors import SettingsError
from app.observability.metrics import Metrics

READ, WRITE, APPROVE = "read", "write", "approve"
SCOPE_PREFIX = "rearrange:"
_STATIC_RIGHTS = {"read": frozenset({READ}), "write": frozenset({READ, WRITE}),
                  "approve": frozenset({READ, WRITE, APPROVE})}
# Refusals before or after a JWT's own check: no token, a static one unknown, a right missing
# (403), the JWKS unreachable (503)
FAILURES = ("missing", "unknown_token", *REASONS, "insufficient_scope", "jwks_unavailable")
_UNQUOTED = re.compile(r'[^\x20-\x7e]|["\\]')  # what a quoted-string header value cannot hold


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: the actor recorded for what they change, their rights, and
    how they signed in (`token`: a static token; `jwt`)."""

    actor: str
    rights: frozenset[str]
    via: str


class Authenticator:
    """The static tokens (token → (actor, role)) and, when set, the JWT verifier; `failed`
    is told the reason of every refusal."""

    def __init__(self, tokens: Mapping[str, tuple[str, str]], verifier: JwtVerifier | None,
                 failed: Callable[[str], None], blocking: bool = False) -> None:
        self.tokens = dict(tokens)
        self.verifier = verifier
        self._failed = failed
        # A JWT may wait for its keys to be fetched from a URL: checked off the event loop
        self.blocking = blocking

    @classmethod
    def of(cls, settings: Settings, metrics: Metrics,
           clock: Callable[[], float] = time.monotonic) -> Authenticator:
        """From the settings: SettingsError for a JWKS file that is not one (a URL is
        fetched on the first JWT that needs it); `clock` (monotonic seconds) times the
        keys' refresh and cooldown."""
        for reason in FAILURES:
            metrics.auth_failures.labels(reason)
        verifier = None
        if settings.admin_jwks is not None:
            verifier = JwtVerifier(_key_set(settings, metrics, clock),
                                   issuer=settings.admin_jwt_issuer or "",
                                   audience=settings.admin_jwt_audience or "",
                                   leeway=settings.admin_jwt_leeway_seconds)
        return cls(settings.tokens(), verifier,
                   lambda reason: metrics.auth_failures.labels(reason).inc(),
                   blocking=_remote(settings.admin_jwks))

    def holder(self, authorization: str | None, field: str,
               right: str | None = None) -> Principal:
        """Who holds the bearer token of `authorization` (401 naming `field`, what needed
        it, for none or one not taken), having `right` if given (403 if not)."""
        token = self._bearer(authorization, field)
        found = self._static(token)
        if found is None:
            found = self._jwt(token, field)
        return self._allowed(found, field, right)

    async def holder_async(self, authorization: str | None, field: str,
                           right: str | None = None) -> Principal:
        """`holder` for an event loop: a JWT whose keys may be fetched is checked on a
        thread, so that a slow identity provider holds up no other request."""
        token = self._bearer(authorization, field)
        found = self._static(token)
        if found is None:
            found = (await run_in_threadpool(self._jwt, token, field) if self.blocking
                     else self._jwt(token, field))
        return self._allowed(found, field, right)

    def _bearer(self, authorization: str | None, field: str) -> str:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            self._failed("missing")
            needs = ("Bearer token required" if field == "Authorization"
                     else "needs an admin token: Authorization: Bearer <token>")
            raise HTTPException(401, {"field": field, "problem": needs},
                                headers={"WWW-Authenticate": "Bearer"})
        return token

    def _static(self, token: str) -> Principal | None:
        found = None
        for known, (actor, role) in self.tokens.items():  # every token, constant time
            if hmac.compare_digest(known.encode(), token.encode()):
                found = Principal(actor, _STATIC_RIGHTS[role], "token")
        return found

    def _jwt(self, token: str, field: str) -> Principal:
        if self.verifier is None or token.count(".") != 2:  # not a JWT: an unknown token
            self._failed("unknown_token")
            raise HTTPException(401, {"field": field, "problem": "unknown token"},
                                headers={"WWW-Authenticate": "Bearer"})
        try:
            claims = self.verifier.claims(token)
            rights = rights_of(claims)
        except TokenRefused as exc:
            self._failed(exc.reason)
            challenge = (f'Bearer error="invalid_token", '
                         f'error_description="{_quotable(exc.problem)}"')
            raise HTTPException(401, {"field": field, "problem": exc.problem,
                                      "reason": exc.reason},
                                headers={"WWW-Authenticate": challenge}) from None
        except KeysUnavailable as exc:
            self._failed("jwks_unavailable")
            raise HTTPException(503, {"field": field, "problem": exc.problem,
                                      "reason": "jwks_unavailable"},
                                headers={"Retry-After": str(math.ceil(exc.retry_after))}
                                ) from None
        return Principal(claims["sub"], rights, "jwt")

    def _allowed(self, found: Principal, field: str, right: str | None) -> Principal:
        if right is None or right in found.rights:
            return found
        self._failed("insufficient_scope")
        if found.via == "token":  # a static read token, refused as it always was
            problem = (f"the token of {found.actor} may not approve (a static token of role "
                       "approve may)" if right == APPROVE
                       else f"the token of {found.actor} is read-only")
            raise HTTPException(403, {"field": field, "problem": problem})
        scope = SCOPE_PREFIX + right
        raise HTTPException(
            403, {"field": field, "problem": f"the token of {found.actor} lacks the scope "
                  f"{scope}", "reason": "insufficient_scope", "missing_scope": scope},
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scope}"'})


def rights_of(claims: Mapping[str, object]) -> frozenset[str]:
    """The rights the token's scopes give: `scope` a space-separated string (RFC 8693),
    `scp` a list (or a string) as some providers write it; other scopes are ignored."""
    scopes: list[str] = []
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if isinstance(value, str):
            scopes += value.split()
        elif isinstance(value, list) and all(isinstance(s, str) for s in value):
            scopes += value
        elif value is not None:
            raise TokenRefused("bad_claim", f"the token's {claim} is neither a space-separated "
                               "string nor a list of strings")
    rights = {s.removeprefix(SCOPE_PREFIX) for s in scopes if s.startswith(SCOPE_PREFIX)}
    rights &= {READ, WRITE, APPROVE}
    if WRITE in rights:
        rights.add(READ)
    return frozenset(rights)


def _key_set(settings: Settings, metrics: Metrics, clock: Callable[[], float]) -> KeySet:
    source = settings.admin_jwks or ""
    fetched = metrics.auth_jwks_fetches.labels
    url = _remote(source)
    keys = KeySet(source, url_fetcher(source, settings.admin_jwks_timeout_seconds) if url
                  else file_fetcher(Path(source)), settings.admin_jwks_refresh_seconds,
                  settings.admin_jwks_cooldown_seconds, lambda result: fetched(result).inc(),
                  clock)
    if not url:  # a file is there at start, or the service does not start
        try:
            keys.load()
        except (OSError, ValueError) as exc:
            raise SettingsError(f"REARRANGE_ADMIN_JWKS: {exc}") from None
    return keys


def _remote(source: str | None) -> bool:
    return source is not None and source.lower().startswith(("http://", "https://"))


def _quotable(text: str) -> str:
    """`text` as an RFC 6750 quoted-string may hold it: printable ASCII, no `"` or `\\`."""
    return _UNQUOTED.sub("?", text)[:200]
