"""The service's own web pages (the SERP inspector, the T&S page): static files packaged in
app/, served with one Content Security Policy, so that neither page can load anything but
this origin's files and API, run inline script, or be framed."""
from __future__ import annotations

from collections.abc import Mapping
from importlib import resources

from fastapi import HTTPException, Response

HEADERS = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
           "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


PAGE = "index.html"


def packaged(package: str, files: Mapping[str, str], name: str = PAGE) -> Response:
    """The file `name` of `package` (by default its page), one of `files` (name → media
    type)."""
    data = resources.files(package).joinpath(name).read_bytes()
    return Response(data, media_type=files[name], headers=HEADERS)


def asset(package: str, files: Mapping[str, str], name: str) -> Response:
    """A script, style sheet or other file of a page: a 404 naming `name` for any name not
    in `files` (and for the page, served at its own path), so that no path reaches a file
    the page does not ship."""
    if name not in files or name == PAGE:
        raise HTTPException(404, {"field": "name", "problem": f"no such file {name!r} here"})
    return packaged(package, files, name)
