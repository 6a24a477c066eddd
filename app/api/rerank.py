"""POST /v1/rerank: raw body in (size-capped), the engine's JSON bytes out.

`answer` is the whole endpoint on raw ASGI parts. `FastPath`, a middleware of the app's
stack (app/api/app.py: inside the response counter, outside the body cap, the exception
handlers and the router), runs it through `serve` for every `POST /v1/rerank`: routing
and FastAPI's request handling cost more than the rules on a 20-document page
(bench/http.py). Middleware added to the app later wraps it like any route. The FastAPI
route below runs the same `answer`; it documents the endpoint in OpenAPI and serves it
when the fast path is switched off (`RearrangeApp.fast_rerank`). Both read the body with
`observe.read_body` and refuse through `errors.refusal`.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.auth import READ, WRITE, Authenticator
from app.api.errors import MAPPED, BodyTooSlow, refusal
from app.api.observe import ClientGone, read_body, send_json
from app.api.openapi import BEARER, refusals, schema_ref
from app.api.services import Services
from app.engine.service import EXPLAIN_HEADER, FORCE_HEADER
from app.errors import FieldError
from app.observability.metrics import RERANK_ROUTE, Metrics

PATH = RERANK_ROUTE
GONE = 499  # nginx's code for a client that left first: counted, never read
router = APIRouter()
_FORCE = FORCE_HEADER.lower().encode()
_EXPLAIN = EXPLAIN_HEADER.lower().encode()


_PAIR = r"[^=,]*[^=,\s][^=,]*=[^,]*[^,\s][^,]*"  # `experiment=variant`, each side not blank
_FORCE_PATTERN = rf"^{_PAIR}(,{_PAIR})*$"
# true or false in any case, as parse_explain takes it.
_EXPLAIN_PATTERN = r"^\s*([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])\s*$"


def _openapi() -> dict[str, Any]:
    """The body (its schema is the engine's, added by app/api/openapi.py) and the QA
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
        400: "the body is not JSON, or one of its objects gives a key twice (`field` names "
             "it)",
        401: "the QA header without a token, or with an unknown one (a JWT refused: "
             "`reason` says why)",
        403: "the QA header with a read-only token (a JWT without the scope it needs)",
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
    try:
        status, body = await answer(request.app.state.services, request.scope,
                                    request.receive)
    except ClientGone:
        return Response(status_code=GONE)  # nobody reads it; counted like any answer
    return Response(body, status, media_type="application/json")


class FastPath:
    """`POST /v1/rerank` answered by `serve`, every other request passed on to the app.

    It sets the scope's `route` to the endpoint's route (below), as the router would, so
    the response counter (and any middleware outside) sees which route answered. The app's
    `fast_rerank` switches it off, for the tests that compare it with the routed endpoint.
    """

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app = app
        # the app's services, given once as ResponseCounter is given its metrics: read from
        # the app's State on every request, each read went through __getattr__ after a
        # failed attribute lookup, an AttributeError built and dropped (~1 % of a
        # 20-document request)
        self.services = services
        self.route = next(r for r in router.routes if isinstance(r, APIRoute) and r.path == PATH)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST"
                and scope["path"] == scope.get("root_path", "") + PATH):
            owner = scope["app"]
            if owner.fast_rerank:
                scope["route"] = self.route
                await serve(self.services, scope, receive, send)
                return
        await self.app(scope, receive, send)


async def serve(services: Services, scope: Scope, receive: Receive, send: Send) -> None:
    """The endpoint as a bare ASGI app: the engine's answer, or the API's refusal."""
    try:
        status, body = await answer(services, scope, receive)
        headers: list[tuple[bytes, bytes]] = []
    except ClientGone:
        status, body, headers = GONE, b"", []
    except MAPPED as exc:  # the exception handlers' mapping, without their Request
        refused = refusal(exc)
        status, body, headers = refused.status, refused.body, refused.raw_headers()
    await send_json(send, status, body, headers)


async def answer(services: Services, scope: Scope, receive: Receive) -> tuple[int, bytes]:
    """(status, JSON body) of the engine's answer for one request: 200, a 4xx naming the
    field or the 503 of a failed closed rule (CONTRACT "When a rule fails"). A refusal
    before the engine (the body's size or deadline, the QA headers) is raised, counted.
    The token is checked only for a QA header."""
    service = services.rearranger
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
    settings = service.settings
    try:
        body = await read_body(declared, receive, settings.max_body_bytes,
                               settings.body_timeout_seconds)
        forced, forced_by, explained = None, None, False
        if force is not None or explain is not None:
            auth = services.auth  # a JWT whose keys may be fetched: on a thread
            forced, forced_by, explained = (
                await run_in_threadpool(qa, auth, force, explain, authorization)
                if auth.blocking else qa(auth, force, explain, authorization))
    except FieldError as exc:  # the body: over its limit (413), too slow (408)
        timeout = isinstance(exc, BodyTooSlow)
        services.metrics.requests.labels("", "timeout" if timeout else "invalid").inc()
        raise
    except HTTPException:  # the QA header: no token (401), read-only (403), malformed
        services.metrics.requests.labels("", "invalid").inc()
        raise
    return await service.serve(body, forced, forced_by, arrived, explained)


def qa(auth: Authenticator, force: str | None, explain: str | None,
       authorization: str | None) -> tuple[dict[str, str] | None, str | None, bool]:
    """(forced variants, who forced them, explain) of the QA headers, their token checked:
    HTTPException for a header without a token (401), with a read-only one where a write
    one is needed (403), or malformed (422)."""
    forced, forced_by = None, None
    if force is not None:  # QA override: never honoured without a token
        forced_by = auth.holder(authorization, FORCE_HEADER, WRITE).actor
        forced = parse_force(force)
    explained = explain is not None and parse_explain(explain)
    if explained:  # QA: what the rules did is not for every caller to read
        auth.holder(authorization, EXPLAIN_HEADER, READ)
    return forced, forced_by, explained


QaAnswer = tuple[int, bytes, list[tuple[str, str]], list[tuple[str, str]], str | None, bool]


def check_qa(auth: Authenticator, metrics: Metrics, force: str | None,
             explain: str | None, authorization: str | None) -> QaAnswer:
    """`qa` for the native listener (app._engine.DataPlane), which cannot catch a Python
    exception: (0, b"", [], forced pairs, forced_by, explain) when the request goes on,
    else (status, error body, headers, [], None, False) of the refusal, counted as the
    Python path counts it."""
    try:
        forced, forced_by, explained = qa(auth, force, explain, authorization)
    except HTTPException as exc:
        metrics.requests.labels("", "invalid").inc()
        refused = refusal(exc)
        return refused.status, refused.body, list(refused.headers.items()), [], None, False
    return 0, b"", [], list((forced or {}).items()), forced_by, explained


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
