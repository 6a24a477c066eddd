"""Liveness, readiness and Prometheus metrics."""
from __future__ import annotations

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
    """Ready when a config is loaded and the banlist is in sync (503 otherwise)."""
    draining = service.draining
    body = {
        "ready": not draining,
        "config_version": service.config.engine.version,
        "banlist_version": service.store.version,
        "banlist_entries": len(service.store),
        "banlist_store": "embedded",
        "banlist_staleness_seconds": 0.0,
        "draining": draining,
    }
    return JSONResponse(body, status_code=200 if body["ready"] else 503)


@router.get("/metrics")
async def metrics(service: Service) -> Response:
    """Prometheus text exposition."""
    m = service.metrics
    m.banlist_entries.set(len(service.store))
    m.banlist_version.set(service.store.version)
    if service.sanctions is not None:
        for state, count in service.sanctions.counts().items():
            m.sanction_hosts.labels(state).set(count)
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
