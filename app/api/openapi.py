"""The OpenAPI document, and Swagger UI and ReDoc served from packaged assets (no CDN).

FastAPI derives the paths, parameters and pydantic bodies from the routes. This module adds
what it cannot see: /v1/rerank's schemas and the error body every refusal has (the
engine's, app/api/contract.py; FastAPI would advertise its own `{detail: [...]}`), the
statuses every route shares (a token refused, a body too large or too slow, a parameter
invalid), and the bearer scheme of the routes that take a token. What one route alone
refuses, it says in its decorator with `refusals`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request, routing
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from app.api import deps
from app.api.contract import wire_schemas

BEARER = "bearer"
DOCS, REDOC, ASSETS = "/docs", "/redoc", "/docs/assets"
# Swagger UI and ReDoc's bundles as the fastapi-offline package ships them
_ASSETS = files("fastapi_offline") / "static"


def schema_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


ERROR = {"application/json": {"schema": schema_ref("ErrorBody")}}


def refusals(reasons: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route's own refusals: status → when, each with the error body."""
    return {status: {"description": why, "content": ERROR} for status, why in reasons.items()}


# The auth dependencies, what each refuses and whether the token is required. `reader` needs
# one only where banlist reads are closed (REARRANGE_BANLIST_READ_AUTH).
_AUTH: dict[Callable[..., Any], dict[int, str]] = {
    deps.writer: {401: "no token, or an unknown one", 403: "the token is read-only"},
    deps.approver: {401: "no token, or an unknown one", 403: "the token may not approve "
                    "(a static approve token, or a JWT with rearrange:approve, may)"},
    deps.admin_reader: {401: "no token, or an unknown one"},
    deps.reader: {401: "an unknown token (or none, where banlist reads need one)"},
}
# With REARRANGE_ADMIN_JWKS, a JWT's own refusals besides: refused with a `reason`, without
# the scope the route needs, or its signing keys not to be had
_JWT_401 = "; a JWT refused (`reason` says why: expired, wrong_issuer, bad_signature, …)"
_JWT: dict[Callable[..., Any], dict[int, str]] = {
    deps.writer: {403: "the token is read-only, or a JWT without the scope rearrange:write"},
    deps.approver: {403: "a JWT without the scope rearrange:approve"},
    deps.admin_reader: {403: "a JWT without the scope rearrange:read"},
    deps.reader: {403: "a JWT without the scope rearrange:read, where banlist reads need "
                       "a token"},
}
_JWKS_503 = {503: "a JWT whose signing keys cannot be fetched from REARRANGE_ADMIN_JWKS "
                  "(`reason`: jwks_unavailable)"}
_BODY = {408: "the body did not arrive within REARRANGE_BODY_TIMEOUT_SECONDS",
         413: "the body is over REARRANGE_MAX_BODY_BYTES"}
# What a write may meet in the store: the embedded list is read-only (several workers) or
# Redis refused or could not be reached (nothing changed, or `write_id` says how to know)
WRITES = {409: "this store takes no writes (a read-only embedded list), or Redis refused the "
               "change as conflicting", 503: "Redis is unreachable or refused the write"}
_JSON_BODY = {400: "the body is not JSON (or not UTF-8), or one of its objects gives a key "
                   "twice (`field` names it: `problem` is `duplicate key`)"}
_INVALID = {422: "a parameter or a field of the body is invalid: `field` names it"}


def install(app: FastAPI, read_auth: bool, jwt: bool = False) -> None:
    """Serve /openapi.json as built here, and /docs (Swagger UI) and /redoc offline;
    `read_auth`: banlist reads need a token; `jwt`: JWTs are taken too."""
    app.openapi = lambda: _document(app, read_auth, jwt)  # type: ignore[method-assign]
    app.mount(ASSETS, StaticFiles(directory=str(_ASSETS)), name="docs-assets")

    @app.get(DOCS, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            swagger_ui_parameters={"persistAuthorization": True})

    @app.get(REDOC, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False)


def allowed(request: Request) -> str:
    """The `Allow` header of a 405: every method the document gives the matched path."""
    route = request.scope.get("route")
    ops = request.app.openapi()["paths"].get(getattr(route, "path_format", None), {})
    methods = {m.upper() for m in ops} or set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods | ({"HEAD"} if "GET" in methods else set())))


def _document(app: FastAPI, read_auth: bool, jwt: bool) -> dict[str, Any]:
    if app.openapi_schema is not None:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, summary=app.summary,
                      routes=app.routes)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for fastapi_own in ("HTTPValidationError", "ValidationError"):  # not what we answer
        schemas.pop(fastapi_own, None)
    schemas.update(wire_schemas())
    components["securitySchemes"] = {BEARER: {
        "type": "http", "scheme": "bearer",
        "description": "an admin token of REARRANGE_ADMIN_TOKENS (`actor:token[:read]`), "
                       "or a JWT of the identity provider whose keys REARRANGE_ADMIN_JWKS "
                       "holds (scopes rearrange:read, rearrange:write, rearrange:approve)"}}
    for route, op in _operations(app, doc):
        _describe(route, op, read_auth, jwt)
    app.openapi_schema = doc
    return doc


def _operations(app: FastAPI, doc: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(route, its operation in `doc`) for every documented route."""
    # Newer FastAPI keeps an included router as one entry and resolves its routes lazily:
    # each comes as a context of its own type, which has the route's attributes
    contexts = getattr(routing, "iter_route_contexts", None)
    routes: Iterable[Any] = contexts(app.routes) if contexts is not None else app.routes
    for route in routes:
        if isinstance(getattr(route, "original_route", route), APIRoute) and \
                route.include_in_schema:
            for method in route.methods:
                op = doc["paths"].get(route.path_format, {}).get(method.lower())
                if op is not None:
                    yield route, op


def _describe(route: Any, op: dict[str, Any], read_auth: bool, jwt: bool) -> None:
    """The shared refusals and the security of one operation, the error body on every
    4xx/5xx it lists."""
    shared: dict[int, str] = {}
    calls = {d.call for d in _dependencies(route)}
    for dependency, statuses in _AUTH.items():
        if dependency in calls:
            shared.update(statuses)
            if jwt:
                shared.update({401: statuses[401] + _JWT_401, **_JWT[dependency], **_JWKS_503})
            optional = dependency is deps.reader and not read_auth
            op["security"] = [{}, {BEARER: []}] if optional else [{BEARER: []}]
    if "requestBody" in op:
        shared.update(_BODY)
        if route.body_field is not None:  # a pydantic body FastAPI parses as JSON
            shared.update(_JSON_BODY)
    responses = op.setdefault("responses", {})
    if op.get("parameters") or "requestBody" in op:
        shared.update(_INVALID)
    elif responses.get("422", {}).get("description") == "Validation Error":
        # FastAPI's, for the hidden Authorization header, which cannot be invalid (a 422
        # the route declares itself stays: a reload's invalid file)
        responses.pop("422")
    for status, why in shared.items():
        own = responses.setdefault(str(status), {"description": why})
        if status == 403 and own["description"] != why:  # the token's, and the route's own
            own["description"] = f"{why}; or {own['description']}"
    for status, response in responses.items():
        if status[0] in "45":
            if status == "422" or "content" not in response:  # FastAPI's 422 is not ours
                response["content"] = ERROR
            if response.get("description") == "Validation Error":
                response["description"] = _INVALID[422]
    op["responses"] = dict(sorted(responses.items()))


def _dependencies(route: Any) -> Iterator[Any]:
    todo = list(route.dependant.dependencies)
    while todo:
        dependant = todo.pop()
        yield dependant
        todo.extend(dependant.dependencies)
