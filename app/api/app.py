"""The FastAPI app over the services: routers, middleware, error mapping, start and stop.

`create_app(settings)` builds the services (`services.build_services`, the one place
where they are made) and the app around them; `app.main` is the start line's module.
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from app import __version__
from app.api import (
    admin,
    admin_page,
    banlist,
    banlist_bulk,
    errors,
    experiments,
    feedback,
    health,
    inspector,
    openapi,
    rerank,
    review,
    sanctions,
)
from app.api.housekeeping import housekeeping
from app.api.observe import BodyLimit, ResponseCounter
from app.api.services import Services, build_services
from app.config.settings import Settings
from app.observability.logs import configure_logging


class RearrangeApp(FastAPI):
    """FastAPI, with the switch of `/v1/rerank`'s fast path (`rerank.FastPath`), and
    FastAPI's OpenTelemetry instrumentation decided once, at start-up.

    FastAPI asks the OpenTelemetry API on every request whether a provider is configured
    (three lookups in `os.environ` while none is): that cost more than the whole
    middleware stack around the fast path (bench/http.py). Its own lifespan configures
    telemetry at start-up, so the answer is read after it, in ours (`probe_telemetry`).
    """

    fast_rerank = True  # False sends /v1/rerank through the router (tests compare both)
    telemetry: bool | None = None  # FastAPI's instrumentation on; None: asked per request

    def probe_telemetry(self) -> None:
        native = getattr(self, "_native_telemetry", None)  # absent from older FastAPI
        self.telemetry = native is not None and bool(native.enabled())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.telemetry is False and scope["type"] == "http":
            if self.root_path:  # what FastAPI.__call__ does when telemetry is off
                scope["root_path"] = self.root_path
            await Starlette.__call__(self, scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None) -> RearrangeApp:
    """The ASGI app; reads the environment when no settings are given."""
    settings = settings or Settings()
    configure_logging(settings.log_level)
    return app_of(build_services(settings))


def app_of(services: Services) -> RearrangeApp:
    """The app serving `services`: they are its state, and it closes them on shutdown."""
    settings = services.settings

    @contextlib.asynccontextmanager
    async def lifespan(app: RearrangeApp) -> AsyncIterator[None]:
        task = asyncio.create_task(housekeeping(services, settings.config_poll_seconds))
        gc.collect()
        gc.freeze()  # start-up objects live forever: keep them out of every collection
        app.probe_telemetry()
        try:
            yield
        finally:
            services.draining.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            services.close()

    app = RearrangeApp(title="Rearrange", version=__version__, lifespan=lifespan,
                       summary="Post-ranking rule pipeline over a search result page",
                       docs_url=None, redoc_url=None)  # openapi.install serves them offline
    app.state.services = services
    # review before banlist: /v1/banlist/pending is its own, not an entry's route
    for module in (rerank, feedback, review, banlist, banlist_bulk, sanctions, admin, health,
                   experiments, inspector, admin_page):
        app.include_router(module.router)
    errors.install(app)
    # Each added goes outside the ones before: from the outside in, the counter, the fast
    # path (it reads its own body), the routed endpoints' body cap. Added later, wraps all.
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes,
                       timeout=settings.body_timeout_seconds)
    app.add_middleware(rerank.FastPath, services=services)
    app.add_middleware(ResponseCounter, metrics=services.metrics)
    openapi.install(app, settings.banlist_read_auth, jwt=settings.admin_jwks is not None)
    return app
