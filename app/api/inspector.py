"""GET /inspector: the SERP inspector, a static page over this service's own API (explain,
config try, banlist lookup), packaged with the app: no build step, nothing from a CDN."""
from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, HTTPException, Response

from app.api.strict import StrictRoute

router = APIRouter(tags=["inspector"], route_class=StrictRoute)

_FILES = {"index.html": "text/html; charset=utf-8",
          "inspector.js": "text/javascript; charset=utf-8",
          "inspector.css": "text/css; charset=utf-8",
          "example.json": "application/json",
          "favicon.svg": "image/svg+xml"}
# Only this origin's own files and API; no inline script, no frames.
_HEADERS = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
            "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


def _file(name: str) -> Response:
    data = resources.files("app.inspector").joinpath(name).read_bytes()
    return Response(data, media_type=_FILES[name], headers=_HEADERS)


@router.get("/inspector", include_in_schema=False)
async def page() -> Response:
    """The inspector's page."""
    return _file("index.html")


@router.get("/inspector/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    """Its script, style sheet and example request."""
    if name not in _FILES or name == "index.html":
        raise HTTPException(404, {"field": "name", "problem": f"no inspector file {name!r}"})
    return _file(name)
