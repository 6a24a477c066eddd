"""The API's one mapping of errors to HTTP: which status each error class answers, and the
one error body every route, the body cap (app/api/observe.py) and `/v1/rerank`'s fast path
(app/api/rerank.py) write: each answers a refusal with `refusal(exc)`.

The core's errors (app/errors.py) carry no status; `STATUS` gives each class its status,
found along the error's class hierarchy (a subclass not listed answers its base's). The
body is `{"error", "field", "problem", …}`: `error` is `invalid_request` for a 4xx and
`error` for a 5xx, unless the error carries a code CONTRACT.md names (`not_durable`).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api import openapi
from app.errors import (
    Conflict,
    FieldError,
    Forbidden,
    Malformed,
    NotFound,
    TooLarge,
    Unavailable,
    validation_problem,
)


class BodyRefused(FieldError):
    """The request body itself, refused while it is read (the field is always `body`)."""

    def __init__(self, problem: str) -> None:
        super().__init__("body", problem)


class BodyTooLarge(BodyRefused, TooLarge):
    """The body is over REARRANGE_MAX_BODY_BYTES (declared, or as it arrives)."""


class BodyTooSlow(BodyRefused):
    """The body did not arrive within REARRANGE_BODY_TIMEOUT_SECONDS."""


# Error class -> HTTP status: the only place the API decides one for a core error.
STATUS: dict[type[Exception], int] = {
    Malformed: 400,
    Forbidden: 403,
    NotFound: 404,
    BodyTooSlow: 408,
    Conflict: 409,
    TooLarge: 413,
    FieldError: 422,
    Unavailable: 503,
    redis.RedisError: 503,  # a store call that needed Redis while it was unreachable
}


def status_of(exc: BaseException) -> int:
    """The status `exc` answers: its nearest class in `STATUS` (500 for none)."""
    for cls in type(exc).__mro__:
        status = STATUS.get(cls)
        if status is not None:
            return status
    return 500


def body(status: int, field: str | None, problem: str | None, code: str | None = None,
         **extra: Any) -> bytes:
    """Every refusal's body, `{"error", "field", "problem", …}`, as JSON bytes, byte for
    byte as JSONResponse would render it (for raw ASGI answers too); `code` is `error`'s
    value when the contract names one (else `invalid_request` for a 4xx, `error` for a 5xx)."""
    doc = {"error": code or ("invalid_request" if status < 500 else "error"), "field": field,
           "problem": problem, **extra}
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode()


# What `refusal` maps; anything else escaping a route is a 500.
MAPPED = (FieldError, redis.RedisError, RequestValidationError, HTTPException)
# The body reader's refusals leave the rest of the body unread: it would be the next request.
CLOSE = {"connection": "close"}


class Refusal(NamedTuple):
    status: int
    body: bytes
    headers: dict[str, str]

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """The headers as an ASGI `http.response.start` carries them."""
        return [(k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in self.headers.items()]


def refusal(exc: Exception) -> Refusal:
    """The status, body and headers of an exception of `MAPPED`."""
    if isinstance(exc, FieldError):
        status = status_of(exc)
        return Refusal(status, body(status, exc.field, exc.problem, code=exc.code, **exc.extra),
                       CLOSE if isinstance(exc, BodyRefused) else {})
    if isinstance(exc, redis.RedisError):  # a store that needed Redis: nothing changed
        status = status_of(exc)
        return Refusal(status, body(status, "redis",
                                    f"Redis is unreachable, nothing was changed: {exc}"), {})
    if isinstance(exc, RequestValidationError):
        errors = [_invalid(e) for e in exc.errors()]
        return Refusal(422, body(422, errors[0]["field"], errors[0]["problem"], errors=errors),
                       {})
    if isinstance(exc, HTTPException):
        status = exc.status_code
        given: object = exc.detail  # a str for Starlette, a dict as our routes raise it
        detail = dict(given) if isinstance(given, dict) else {"problem": str(given)}
        # FastAPI's own 400 is a body it could not decode; ours name their field
        field = detail.pop("field", "body" if status == 400 else None)
        return Refusal(status, body(status, field, detail.pop("problem", None), **detail),
                       dict(exc.headers or {}))
    raise TypeError(f"not an API refusal: {exc!r}")


def _invalid(error: Mapping[str, Any]) -> dict[str, str]:
    """One of a request's validation errors: the field as the request spells it
    (`body.expires_at`, `query.limit`, `body.regions.0`) and the problem in the project's
    words (validation_problem), never pydantic's."""
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":  # FastAPI's: ("body", the character it stopped at)
        return {"field": "body", "problem": f"{validation_problem(error)} (at character "
                                            f"{loc[-1]})"}
    return {"field": ".".join(str(p) for p in loc), "problem": validation_problem(error)}


def install(app: FastAPI) -> None:
    """Every route's refusals answered through `refusal`."""
    for kind in MAPPED:
        app.add_exception_handler(kind, _handler)


async def _handler(request: Request, exc: Exception) -> Response:
    status, content, headers = refusal(exc)
    if status == 405:  # the router's: Allow names every method the document gives the path
        headers = {**headers, "Allow": openapi.allowed(request)}
    return Response(content, status, headers=headers, media_type="application/json")
