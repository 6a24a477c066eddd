"""FastAPI dependencies: the service objects from app.state, and bearer-token auth."""
from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from app.banlist.store import EmbeddedStore
from app.service import Rearranger


def service(request: Request) -> Rearranger:
    return request.app.state.service


def store(request: Request) -> EmbeddedStore:
    return request.app.state.service.store


def actor(request: Request, authorization: Annotated[str | None, Header()] = None) -> str:
    """The actor of the bearer token; the caller never names itself."""
    return token_actor(request, authorization, "Authorization")


def token_actor(request: Request, authorization: str | None, field: str) -> str:
    """The actor of a valid admin bearer token; 401 naming `field` (what needed it) if not."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        needs = ("Bearer token required" if field == "Authorization"
                 else "needs an admin token: Authorization: Bearer <token>")
        raise HTTPException(401, {"field": field, "problem": needs},
                            headers={"WWW-Authenticate": "Bearer"})
    found = None
    for known, who in request.app.state.tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):  # every token, constant time
            found = who
    if found is None:
        raise HTTPException(401, {"field": field, "problem": "unknown token"},
                            headers={"WWW-Authenticate": "Bearer"})
    return found


Service = Annotated[Rearranger, Depends(service)]
Store = Annotated[EmbeddedStore, Depends(store)]
Actor = Annotated[str, Depends(actor)]
