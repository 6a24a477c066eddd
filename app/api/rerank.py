"""POST /v1/rerank: raw body in (size-capped), msgspec decode, JSON bytes out."""
from __future__ import annotations

import asyncio
import time
from typing import Annotated

import msgspec
from fastapi import APIRouter, Header, HTTPException, Request, Response

from app.api.deps import Service, token_actor
from app.contract import request_schema
from app.errors import FieldError
from app.service import FORCE_HEADER

router = APIRouter()
_encode = msgspec.json.Encoder().encode  # also encodes what msgspec decoded (e.g. huge ints)


@router.post("/v1/rerank", openapi_extra=request_schema(), tags=["rerank"],
             summary="Rerank one result page")
async def rerank(
    request: Request, service: Service,
    x_rearrange_force_variant: Annotated[str | None, Header(
        description="QA only: `experiment=variant[, …]` forces variants for this request; "
                    "needs `Authorization: Bearer <admin token>`")] = None,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    """The page after every phase, with annotations, removals and an audit of each change."""
    arrived = time.perf_counter()  # the deadline for optional rules counts from here
    limit = service.settings.max_body_bytes
    declared = request.headers.get("content-length")
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
    if x_rearrange_force_variant is not None:  # QA override: never honoured without a token
        forced_by = token_actor(request, authorization, FORCE_HEADER)
        forced = parse_force(x_rearrange_force_variant)
    try:
        response = service.rerank(bytes(body), forced, forced_by, arrived)
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
