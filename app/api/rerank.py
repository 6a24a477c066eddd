"""POST /v1/rerank: raw body in (size-capped), msgspec decode, JSON bytes out."""
from __future__ import annotations

import asyncio
import time

import msgspec
from fastapi import APIRouter, HTTPException, Request, Response

from app.api.deps import token_actor
from app.contract import request_schema
from app.errors import FieldError
from app.service import FORCE_HEADER, Rearranger

router = APIRouter()
_encode = msgspec.json.Encoder().encode  # also encodes what msgspec decoded (e.g. huge ints)


def _openapi() -> dict:
    """The body schema (from the msgspec Structs) and the QA header, documented by hand:
    the route takes no FastAPI parameters, because solving them cost ~0.1 ms a request."""
    extra = request_schema()
    extra["parameters"] = [{
        "name": FORCE_HEADER.lower(), "in": "header", "required": False,
        "schema": {"type": "string"},
        "description": "QA only: `experiment=variant[, …]` forces variants for this request; "
                       "needs `Authorization: Bearer <admin token>`"}]
    return extra


@router.post("/v1/rerank", openapi_extra=_openapi(), tags=["rerank"],
             summary="Rerank one result page")
async def rerank(request: Request) -> Response:
    """The page after every phase, with annotations, removals and an audit of each change."""
    arrived = time.perf_counter()  # the deadline for optional rules counts from here
    service: Rearranger = request.app.state.service
    headers = request.headers
    limit = service.settings.max_body_bytes
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, {"field": "body", "problem": f"{declared} bytes, over the "
                                  f"limit of {limit}"})
    body = bytearray()
    try:
        async with asyncio.timeout(service.settings.body_timeout_seconds):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    service.metrics.requests.labels("", "invalid").inc()
                    raise HTTPException(413, {"field": "body",
                                              "problem": f"over the limit of {limit} bytes"})
    except TimeoutError:  # a client trickling its body must not hold a worker's slot
        service.metrics.requests.labels("", "timeout").inc()
        raise HTTPException(408, {"field": "body", "problem": "not received within "
                                  f"{service.settings.body_timeout_seconds:g} s"}) from None
    forced, forced_by = None, None
    force = headers.get(FORCE_HEADER)
    if force is not None:  # QA override: never honoured without a token
        forced_by = token_actor(request, headers.get("authorization"), FORCE_HEADER)
        forced = parse_force(force)
    try:
        response = service.rerank(body, forced, forced_by, arrived)  # msgspec reads a bytearray
    except FieldError:
        service.metrics.requests.labels("", "invalid").inc()
        raise
    return Response(_encode(response), media_type="application/json")


def parse_force(header: str) -> dict[str, str]:
    """`exp=variant[, exp2=variant2]` → {exp: variant}; 422 naming the header if malformed."""
    forced: dict[str, str] = {}
    for part in header.split(","):
        name, sep, variant = (x.strip() for x in part.partition("="))
        if not sep or not name or not variant or name in forced:
            raise HTTPException(422, {"field": FORCE_HEADER, "problem": f"{part.strip()!r}: "
                                      "expected experiment=variant, each experiment once"})
        forced[name] = variant
    return forced
