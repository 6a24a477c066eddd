"""POST /v1/rerank: raw body in (size-capped), the engine's JSON bytes out.

`answer` is the whole endpoint on raw ASGI parts. `serve` runs it straight from the
app's `__call__` (main.RearrangeApp), before FastAPI's middleware stack and router:
those layers cost more than the rules on a 20-document page (bench/http.py). The
FastAPI route below runs the same `answer`; it documents the endpoint in OpenAPI and
serves it when the fast path is switched off (`RearrangeApp.fast_rerank`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from starlette.types import Receive, Scope, Send

from app.api.deps import token_actor, token_reader
from app.api.errors import BodyRefused, BodyTooLarge, BodyTooSlow, encode, error_body, render
from app.api.observe import CLOSE, ClientGone, read_capped
from app.api.openapi import BEARER, refusals, schema_ref
from app.engine.service import EXPLAIN_HEADER, FORCE_HEADER, Rearranger
from app.errors import FieldError
from app.observability.metrics import RERANK_ROUTE

PATH = RERANK_ROUTE
GONE = 499  # nginx's code for a client that left first: counted, never sent
router = APIRouter()
_FORCE = FORCE_HEADER.lower().encode()
_EXPLAIN = EXPLAIN_HEADER.lower().encode()
Headers = list[tuple[bytes, bytes]]


_PAIR = r"[^=,]*[^=,\s][^=,]*=[^,]*[^,\s][^,]*"  # `experiment=variant`, each side not blank
_FORCE_PATTERN = rf"^{_PAIR}(,{_PAIR})*$"
# true or false in any case, as parse_explain takes it.
_EXPLAIN_PATTERN = r"^\s*([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])\s*$"


def _openapi() -> dict[str, Any]:
    """The body (its schema is the msgspec Structs', added by app/api/openapi.py) and the QA
    header, documented by hand: the route takes no FastAPI parameters, because solving them
    cost ~0.1 ms a request. A token is needed only with the QA header."""
    return {
        "requestBody": {"required": True, "content": {
            "application/json": {"schema": schema_ref("RerankRequest")}}},
        "parameters": [{
            "name": FORCE_HEADER.lower(), "in": "header", "required": False,
            "schema": {"type": "string", "pattern": _FORCE_PATTERN},
            "description": "QA only: `experiment=variant[, …]` forces variants for this "
                           "request; needs `Authorization: Bearer <admin token>`"},
            {"name": EXPLAIN_HEADER.lower(), "in": "header", "required": False,
             "schema": {"type": "string", "pattern": _EXPLAIN_PATTERN},
             "description": "QA only: `true` adds `explain` to the response, every step "
                            "with what it did or why it did not run and the page after it; "
                            "needs `Authorization: Bearer <admin token>` (read-only is "
                            "enough)"}],
        "security": [{}, {BEARER: []}]}


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "the page after every phase",
          "content": {"application/json": {"schema": schema_ref("RerankResponse")}}},
    **refusals({
        400: "the body is not JSON",
        401: "the QA header without a token, or with an unknown one",
        403: "the QA header with a read-only token",
        408: "the body did not arrive within REARRANGE_BODY_TIMEOUT_SECONDS",
        413: "the body, a document's text or the page is over its limit",
        422: "a field is invalid (`field` is its JSON path), or an unknown profile"}),
    503: {"description": "a rule whose `on_error` is `closed` failed: no page",
          "content": {"application/json": {"schema": schema_ref("RuleFailed")}}},
}


@router.post(PATH, openapi_extra=_openapi(), responses=_RESPONSES, tags=["rerank"],
             summary="Rerank one result page")
async def rerank(request: Request) -> Response:
    """The page after every phase, with annotations, removals and an audit of each change."""
    state = request.app.state
    status, body, headers = await answer(state.service, state.tokens, request.scope,
                                         request.receive)
    if status == GONE:
        return Response(status_code=GONE)  # nobody reads it; counted like the fast path
    return Response(body, status, media_type="application/json",
                    headers={k.decode(): v.decode() for k, v in headers})


async def serve(service: Rearranger, tokens: Mapping[str, tuple[str, str]], scope: Scope,
                receive: Receive, send: Send) -> None:
    """The endpoint as a bare ASGI app; counts the response like ResponseCounter does."""
    status = 500  # an exception escaping `answer` is a 500 (uvicorn answers it)
    try:
        status, body, headers = await answer(service, tokens, scope, receive)
        if status == GONE:
            return
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()), *headers]})
        await send({"type": "http.response.body", "body": body})
    finally:
        service.metrics.http_response(PATH, status)


async def answer(service: Rearranger, tokens: Mapping[str, tuple[str, str]], scope: Scope,
                 receive: Receive) -> tuple[int, bytes, Headers]:
    """(status, JSON body, extra headers) for one request; errors name the field."""
    arrived = service.clock()  # the deadline for optional rules counts from here
    declared = force = authorization = explain = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            declared = value
        elif name == _FORCE:
            force = value.decode("latin-1")
        elif name == b"authorization":
            authorization = value.decode("latin-1")
        elif name == _EXPLAIN:
            explain = value.decode("latin-1")
    try:
        body = await _read_body(service, declared, receive)
        forced, forced_by = None, None
        if force is not None:  # QA override: never honoured without a token
            forced_by = token_actor(tokens, authorization, FORCE_HEADER)
            forced = parse_force(force)
        explained = explain is not None and parse_explain(explain)
        if explained:  # QA: what the rules did is not for every caller to read
            token_reader(tokens, authorization, EXPLAIN_HEADER)
        # 200, a 4xx naming the field, or the 503 of a failed closed rule (CONTRACT
        # "When a rule fails"): the engine writes each body
        status, answered = service.rerank(body, forced, forced_by, arrived, explained)
    except ClientGone:
        return GONE, b"", []
    except FieldError as exc:  # the body: over its limit (413), too slow (408), invalid (4xx)
        timeout = isinstance(exc, BodyTooSlow)
        service.metrics.requests.labels("", "timeout" if timeout else "invalid").inc()
        status, refused = render(exc)
        # the rest of a refused body would be read as the "next request"
        return status, encode(refused), CLOSE if isinstance(exc, BodyRefused) else []
    except HTTPException as exc:  # the QA header: no token (401), read-only (403), malformed
        service.metrics.requests.labels("", "invalid").inc()
        given: object = exc.detail  # a str for Starlette, a dict as parse_force raises it
        detail = given if isinstance(given, dict) else {"problem": str(given)}
        headers = [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()]
        refused = error_body(exc.status_code, **{"field": None, **detail})
        return exc.status_code, encode(refused), headers
    return status, answered, []


async def _read_body(service: Rearranger, declared: bytes | None,
                     receive: Receive) -> bytes | bytearray:
    settings = service.settings
    limit = settings.max_body_bytes
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"{int(declared)} bytes, over the limit of {limit}")
    return await read_capped(receive, limit, settings.body_timeout_seconds)


def parse_explain(header: str) -> bool:
    """`true` or `false` (any case); 422 naming the header for anything else."""
    value = header.strip().lower()
    if value not in ("true", "false"):
        raise HTTPException(422, {"field": EXPLAIN_HEADER,
                                  "problem": f"{header.strip()!r}: expected true or false"})
    return value == "true"


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
