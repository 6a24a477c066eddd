"""The API's refusals: one error body, and one mapping of exceptions to statuses.

Every route, the body cap (app/api/observe.py) and `/v1/rerank`'s fast path
(app/api/rerank.py) answer a refusal with `refusal(exc)`: the core's errors carry what
was wrong, and this module alone turns them into a status, a body and its headers. The
engine writes its own refusals of a page's content (in the same shape: docs/api.md).
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api import openapi
from app.errors import BanlistError, FieldError

# What `refusal` maps; anything else escaping a route is a 500.
MAPPED = (FieldError, BanlistError, redis.RedisError, RequestValidationError, HTTPException)
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


def body(status: int, field: str | None, problem: str | None, **extra: Any) -> bytes:
    """`{"error", "field", "problem", …}`, every refusal's body, written as JSONResponse
    writes JSON."""
    return json.dumps({"error": "invalid_request" if status < 500 else "error",
                       "field": field, "problem": problem, **extra},
                      ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def refusal(exc: Exception) -> Refusal:
    """The status, body and headers of an exception of `MAPPED`."""
    if isinstance(exc, FieldError):
        unread = exc.field == "body" and exc.status in (408, 413)
        return Refusal(exc.status, body(exc.status, exc.field, exc.problem),
                       CLOSE if unread else {})
    if isinstance(exc, BanlistError):
        return Refusal(exc.status, body(exc.status, exc.field, exc.problem, **exc.extra), {})
    if isinstance(exc, redis.RedisError):
        # A write that needs Redis while it is unreachable: say so, change nothing.
        return Refusal(503, body(503, "redis",
                                 f"Redis is unreachable, nothing was changed: {exc}"), {})
    if isinstance(exc, RequestValidationError):
        errors = [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]}
                  for e in exc.errors()]
        return Refusal(422, body(422, errors[0]["field"], errors[0]["problem"], errors=errors),
                       {})
    if isinstance(exc, HTTPException):
        status = exc.status_code
        detail = dict(exc.detail) if isinstance(exc.detail, dict) else {"problem": str(exc.detail)}
        # FastAPI's own 400 is a body it could not decode; ours name their field
        field = detail.pop("field", "body" if status == 400 else None)
        return Refusal(status, body(status, field, detail.pop("problem", None), **detail),
                       dict(exc.headers or {}))
    raise TypeError(f"not an API refusal: {exc!r}")


def install(app: FastAPI) -> None:
    """Every route's refusals answered through `refusal`."""
    for kind in MAPPED:
        app.add_exception_handler(kind, _handler)


async def _handler(request: Request, exc: Exception) -> Response:
    status, content, headers = refusal(exc)
    if status == 405:  # the router's: Allow names every method the document gives the path
        headers = {**headers, "Allow": openapi.allowed(request)}
    return Response(content, status, headers=headers, media_type="application/json")
