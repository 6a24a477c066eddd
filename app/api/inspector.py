"""GET /inspector: the SERP inspector, a static page over this service's own API (explain,
config try, banlist lookup), packaged with the app: no build step, nothing from a CDN."""
from __future__ import annotations

from fastapi import APIRouter, Response

from app.api import pages
from app.api.strict import StrictRoute

router = APIRouter(tags=["inspector"], route_class=StrictRoute)

_FILES = {"index.html": "text/html; charset=utf-8",
          "inspector.js": "text/javascript; charset=utf-8",
          # the DOM helpers the T&S page (/admin) loads from here too
          "dom.js": "text/javascript; charset=utf-8",
          "inspector.css": "text/css; charset=utf-8",
          "example.json": "application/json",
          "favicon.svg": "image/svg+xml"}


@router.get("/inspector", include_in_schema=False)
async def page() -> Response:
    """The inspector's page."""
    return pages.packaged("app.inspector", _FILES)


@router.get("/inspector/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    """Its script, style sheet and example request."""
    return pages.asset("app.inspector", _FILES, name)
