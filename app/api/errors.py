"""The API's one mapping of errors to HTTP: which status each error class answers, and the
one error body every route and the rerank fast path write.

The core's errors (app/errors.py) carry no status; `STATUS` gives each class its status,
found along the error's class hierarchy (a subclass not listed answers its base's). The
body is `{"error", "field", "problem", …}`: `error` is `invalid_request` for a 4xx and
`error` for a 5xx.
"""
from __future__ import annotations

import json
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.openapi import allowed
from app.errors import Conflict, FieldError, Malformed, NotFound, TooLarge, Unavailable


class BodyRefused(FieldError):
    """The request body itself, refused while it is read (the field is always `body`)."""

    def __init__(self, problem: str) -> None:
        super().__init__("body", problem)

    @property
    def status(self) -> int:
        """Its status, from `STATUS` (the body reader's callers answer it themselves)."""
        return status_of(self)


class BodyTooLarge(BodyRefused, TooLarge):
    """The body is over REARRANGE_MAX_BODY_BYTES (declared, or as it arrives)."""


class BodyTooSlow(BodyRefused):
    """The body did not arrive within REARRANGE_BODY_TIMEOUT_SECONDS."""


# Error class -> HTTP status: the only place the API decides one for a core error.
STATUS: dict[type[Exception], int] = {
    Malformed: 400,
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


def error_body(status: int, field: str | None, problem: str, **extra: Any) -> dict[str, Any]:
    """The API's error body for `status`."""
    return {"error": "invalid_request" if status < 500 else "error", "field": field,
            "problem": problem, **extra}


def encode(body: dict[str, Any]) -> bytes:
    """A body as JSON, byte for byte as JSONResponse renders it (for raw ASGI answers)."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode()


def render(exc: Exception) -> tuple[int, dict[str, Any]]:
    """(status, body) for an error the API answers: a core FieldError (any subclass), or a
    RedisError (a store that needed Redis while it was unreachable: nothing changed)."""
    status = status_of(exc)
    if isinstance(exc, FieldError):
        return status, error_body(status, exc.field, exc.problem, **exc.extra)
    return status, error_body(status, "redis",
                              f"Redis is unreachable, nothing was changed: {exc}")


def error_response(status: int, field: str | None, problem: str,
                   **extra: Any) -> JSONResponse:
    """The error body as a response."""
    return JSONResponse(error_body(status, field, problem, **extra), status_code=status)


def install(app: FastAPI) -> None:
    """The app's exception handlers: every error a route raises is answered here."""

    async def core_error(_: Request, exc: Exception) -> JSONResponse:
        status, body = render(exc)
        return JSONResponse(body, status_code=status)

    app.add_exception_handler(FieldError, core_error)
    app.add_exception_handler(redis.RedisError, core_error)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]}
                  for e in exc.errors()]
        return error_response(422, errors[0]["field"], errors[0]["problem"], errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        given: object = exc.detail  # a str for Starlette, a dict as our routes raise it
        detail = given if isinstance(given, dict) else {"problem": str(given)}
        # FastAPI's own 400 is a body it could not decode
        body = {"error": "invalid_request" if exc.status_code < 500 else "error",
                "field": "body" if exc.status_code == 400 else None, **detail}
        headers = exc.headers
        if exc.status_code == 405:  # the router's Allow names one route's methods of the path's
            headers = {**(headers or {}), "Allow": allowed(request)}
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
