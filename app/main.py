"""`uvicorn app.main:app`, CONTRACT.md's start line: the app, built from the environment's
settings when uvicorn first reads `app` (`rearrange serve` builds the same one:
app/api/serving.py). The services are made in one place, `app.api.services.build_services`;
`app.api.app.create_app` puts the routes over them."""
from __future__ import annotations

from typing import Any

from app.api.app import create_app
from app.config.settings import Settings

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """`app`: built on first access, so that importing this module builds nothing."""
    if name == "app":
        built = create_app(Settings())
        globals()["app"] = built
        return built
    raise AttributeError(name)
