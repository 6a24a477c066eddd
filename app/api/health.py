"""Liveness, readiness and Prometheus metrics."""
from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import Service

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(service: Service) -> JSONResponse:
    """Ready when a config is loaded and a banlist copy is held (503 otherwise).

    A replica that lost Redis, or refuses a Redis that went backwards, stays ready: it
    serves its last copy, and the body says how stale it is and why (`banlist_in_sync`,
    `banlist_staleness_seconds`, `banlist_diverged`). Taking every replica out of the
    load balancer because Redis hiccuped would turn a banlist delay into an outage.
    """
    draining = service.draining
    state = service.store.sync_state()
    loaded = state.details.get("banlist_loaded", True)
    body = {
        "ready": not draining and loaded,
        "config_version": service.config.engine.version,
        "banlist_version": service.store.version,
        "banlist_entries": len(service.store),
        **state.as_dict(),
        "draining": draining,
    }
    if body["banlist_staleness_seconds"] == float("inf"):
        body["banlist_staleness_seconds"] = None
    return JSONResponse(body, status_code=200 if body["ready"] else 503)


@router.get("/metrics")
async def metrics(service: Service) -> Response:
    """Prometheus text exposition."""
    m, store = service.metrics, service.store
    state = store.sync_state()
    m.banlist_entries.set(len(store))
    m.banlist_version.set(store.version)
    for scope, n in store.index.counts.items():
        m.banlist_scope_entries.labels(scope).set(n)
    m.banlist_staleness.set(state.staleness_seconds)
    m.banlist_epoch.set(state.epoch)
    m.banlist_in_sync.set(1 if state.in_sync else 0)
    m.banlist_diverged.set(1 if state.diverged else 0)
    if service.sanctions is not None:  # reads every host state: off the event loop
        counts = await asyncio.to_thread(service.sanctions.counts)
        for sanction_state, count in counts.items():
            m.sanction_hosts.labels(sanction_state).set(count)
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
