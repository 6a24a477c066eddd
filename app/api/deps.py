"""FastAPI dependencies: the services (`services.Services`, on app.state), and who holds
the bearer token with the right a route needs (`auth.Authenticator`: static tokens, JWTs)."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Request

from app.api.auth import APPROVE, READ, WRITE, Authenticator, Principal
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


def _auth(request: Request) -> Authenticator:
    found: Authenticator = request.app.state.services.auth
    return found


async def writer(request: Request, authorization: Authorization = None) -> Principal:
    """Who holds a write token, or a JWT with `rearrange:write` (403 for one without)."""
    return await _auth(request).holder_async(authorization, "Authorization", WRITE)


async def approver(request: Request, authorization: Authorization = None) -> Principal:
    """Who holds a token that may approve others' high-impact bans: a static approve token,
    or a JWT with `rearrange:approve` (403 for one without)."""
    return await _auth(request).holder_async(authorization, "Authorization", APPROVE)


async def actor(holder: Annotated[Principal, Depends(writer)]) -> str:
    """The actor of a write token: the static token's, or the JWT's `sub`; the caller
    never names itself."""
    return holder.actor


async def admin_reader(request: Request,
                       authorization: Authorization = None) -> str:
    """The actor of any admin token, read-only or write (what the config routes show needs
    one even where banlist reads are open)."""
    return (await _auth(request).holder_async(authorization, "Authorization", READ)).actor


async def reader(request: Request,
                 authorization: Authorization = None) -> str:
    """Who reads the banlist: any token when reads need auth, else anyone (`anonymous`);
    a token sent where none is needed must still be valid."""
    needed = request.app.state.services.settings.banlist_read_auth
    if not needed and authorization is None:
        return "anonymous"
    holder = await _auth(request).holder_async(authorization, "Authorization",
                                               READ if needed else None)
    return holder.actor


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
Writer = Annotated[Principal, Depends(writer)]  # the actor and its rights (approve, say)
Approver = Annotated[Principal, Depends(approver)]
Reader = Annotated[str, Depends(reader)]
AdminReader = Annotated[str, Depends(admin_reader)]
