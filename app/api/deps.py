"""FastAPI dependencies: the services (`services.Services`, on app.state), and bearer-token
auth with roles."""
from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request

from app.api.services import Services
from app.banlist.base import BanStore
from app.errors import FieldError

# The token, read here; the document declares it as the bearer scheme (app/api/openapi.py)
Authorization = Annotated[str | None, Header(include_in_schema=False)]


# Dependencies are `async def` on purpose: FastAPI runs a plain `def` dependency in its
# thread pool, a thread hop per request that cost ~0.3 ms on /v1/rerank (bench/http.py).
async def services(request: Request) -> Services:
    found: Services = request.app.state.services  # app_of put them there
    return found


async def store(request: Request) -> BanStore:
    found: BanStore = request.app.state.services.store
    return found


def _holder(tokens: Mapping[str, tuple[str, str]], authorization: str | None,
            field: str) -> tuple[str, str]:
    """(actor, role) of a valid bearer token; 401 naming `field` (what needed it) if not."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        needs = ("Bearer token required" if field == "Authorization"
                 else "needs an admin token: Authorization: Bearer <token>")
        raise HTTPException(401, {"field": field, "problem": needs},
                            headers={"WWW-Authenticate": "Bearer"})
    found = None
    for known, holder in tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):  # every token, constant time
            found = holder
    if found is None:
        raise HTTPException(401, {"field": field, "problem": "unknown token"},
                            headers={"WWW-Authenticate": "Bearer"})
    return found


def token_reader(tokens: Mapping[str, tuple[str, str]], authorization: str | None,
                 field: str) -> str:
    """The actor of any valid token, read-only or write; 401 naming `field` if none."""
    return _holder(tokens, authorization, field)[0]


def token_actor(tokens: Mapping[str, tuple[str, str]], authorization: str | None,
                field: str) -> str:
    """The actor of a valid write token (the caller never names itself); 403 for read-only."""
    who, role = _holder(tokens, authorization, field)
    if role != "write":
        raise HTTPException(403, {"field": field,
                                  "problem": f"the token of {who} is read-only"})
    return who


async def actor(request: Request,
                authorization: Authorization = None) -> str:
    """The actor of a write token (403 for a read-only token)."""
    return token_actor(request.app.state.tokens, authorization, "Authorization")


async def admin_reader(request: Request,
                       authorization: Authorization = None) -> str:
    """The actor of any admin token, read-only or write (what the config routes show needs
    one even where banlist reads are open)."""
    return _holder(request.app.state.tokens, authorization, "Authorization")[0]


async def reader(request: Request,
                 authorization: Authorization = None) -> str:
    """Who reads the banlist: any token when reads need auth, else anyone (`anonymous`)."""
    if not request.app.state.services.settings.banlist_read_auth and authorization is None:
        return "anonymous"
    return _holder(request.app.state.tokens, authorization, "Authorization")[0]


async def known_query(request: Request) -> None:
    """422 naming a query parameter the route does not take: a filter silently ignored
    (`?actor=` on a route without one) answers a question nobody asked."""
    route = request.scope.get("route")
    known = _query_names(route) if route is not None else frozenset()
    for name in request.query_params:
        if name not in known:
            takes = ", ".join(sorted(known)) or "none"
            raise FieldError(f"query.{name}", f"unknown query parameter (this route takes: "
                             f"{takes})")


def _query_names(route: Any) -> frozenset[str]:
    """The query parameters of a route, its dependencies' included (a walk of a few nodes:
    routes are not hashable, and a cache by id would outlive the app in the tests)."""
    names: set[str] = set()
    todo = [route.dependant]
    while todo:
        dependant = todo.pop()
        names.update(p.alias for p in dependant.query_params)
        todo.extend(dependant.dependencies)
    return frozenset(names)


Wired = Annotated[Services, Depends(services)]
Store = Annotated[BanStore, Depends(store)]
Actor = Annotated[str, Depends(actor)]
Reader = Annotated[str, Depends(reader)]
AdminReader = Annotated[str, Depends(admin_reader)]
