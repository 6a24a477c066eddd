"""GET /admin: the T&S page, a static page over the banlist API (lookup and history, add,
extend, remove, bulk remove after a dry run, the review queue), packaged with the app like
the inspector: no build step, nothing from a CDN, the same Content Security Policy.

The page needs no token; every call it makes sends the bearer token the analyst pasted
(a JWT or a static token), so each route's own check decides what they may do."""
from __future__ import annotations

from fastapi import APIRouter, Response

from app.api import pages
from app.api.strict import StrictRoute

router = APIRouter(tags=["admin page"], route_class=StrictRoute)

_FILES = {"index.html": "text/html; charset=utf-8",
          "admin.js": "text/javascript; charset=utf-8",
          "admin.css": "text/css; charset=utf-8"}


@router.get("/admin", include_in_schema=False)
async def page() -> Response:
    """The T&S page."""
    return pages.packaged("app.admin_page", _FILES)


@router.get("/admin/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    """Its script and style sheet."""
    return pages.asset("app.admin_page", _FILES, name)
