"""POST /v1/rerank: raw body in (size-capped), msgspec decode, JSON bytes out."""
from __future__ import annotations

import msgspec
from fastapi import APIRouter, HTTPException, Request, Response

from app.api.deps import Service
from app.contract import request_schema
from app.errors import FieldError

router = APIRouter()
_encode = msgspec.json.Encoder().encode  # also encodes what msgspec decoded (e.g. huge ints)


@router.post("/v1/rerank", openapi_extra=request_schema(), tags=["rerank"],
             summary="Rerank one result page")
async def rerank(request: Request, service: Service) -> Response:
    """The page after every phase, with annotations, removals and an audit of each change."""
    limit = service.settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, {"field": "body", "problem": f"{declared} bytes, over the "
                                  f"limit of {limit}"})
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            service.metrics.requests.labels("", "invalid").inc()
            raise HTTPException(413, {"field": "body", "problem": f"over the limit of {limit} "
                                      "bytes"})
    try:
        response = service.rerank(bytes(body))
    except FieldError:
        service.metrics.requests.labels("", "invalid").inc()
        raise
    return Response(_encode(response), media_type="application/json")
