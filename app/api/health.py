"""Liveness, readiness and Prometheus metrics."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app import __version__
from app.api.deps import Wired
from app.api.services import Services
from app.api.strict import StrictRoute
from app.banlist.base import SyncState
from app.observability.metrics import Metrics

router = APIRouter(tags=["health"], route_class=StrictRoute)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive, and which release it runs."""
    return {"status": "ok", "version": __version__}


def sync_states(services: Services) -> dict[str, SyncState]:
    """How each copy this replica holds relates to its source of truth, by structure."""
    return {"banlist": services.store.sync_state(),
            "quarantine": services.quarantine.sync_state(),
            "review": services.review.pending.sync_state(),
            "sanctions": services.sanctions.states.sync_state()}


@router.get("/readyz", responses={503: {
    "description": "not ready (no config, a list not loaded yet, or draining): the same body"}})
async def readyz(services: Wired) -> JSONResponse:
    """Ready when a config is loaded and a copy of each list is held (503 otherwise).

    A replica that lost Redis, or refuses what Redis holds (older, lost, forked), stays
    ready: it serves its last copy, and the body says how stale it is and why, per
    structure (`banlist_*`, `quarantine_*`, `review_*`, `sanctions_*`). Taking every replica
    out of the load balancer because Redis hiccuped would turn a banlist delay into an
    outage.
    """
    draining = services.draining.is_set()
    states = sync_states(services)
    loaded = all(s.details.get("loaded", True) for s in states.values())
    # a copy lacking changes Redis lost, while another replica holds them, serves no traffic
    complete = all(s.missing is None for s in states.values())
    body: dict[str, Any] = {
        "ready": not draining and loaded and complete,
        "config_version": services.config.engine.version,
        "banlist_version": services.store.version,
        "banlist_entries": len(services.store),
        "quarantine_version": services.quarantine.version,
        "quarantine_entries": len(services.quarantine),
    }
    for name, state in states.items():
        body.update(state.as_dict(name))
    policy = services.redis_policy
    if policy is not None:
        body["redis_maxmemory_policy"] = policy.policy
        body["redis_policy_problem"] = policy.problem or policy.unchecked
    body["draining"] = draining
    # The Python rule processes: up, busy, starting, and calls waiting for one
    body["python_rules"] = services.executor.state()
    return JSONResponse(body, status_code=200 if body["ready"] else 503)


def gauges(services: Services) -> Callable[[Metrics], None]:
    """What sets the service-state gauges of `services` (read from memory, never Redis)."""

    def set_gauges(m: Metrics) -> None:
        store = services.store
        m.banlist_entries.set(len(store))
        m.banlist_version.set(store.version)
        for scope, n in store.index.counts.items():
            m.banlist_scope_entries.labels(scope).set(n)
        sites_filter = store.index.filter_state
        m.banlist_filter_gone.set(sites_filter["gone"])
        m.banlist_filter_refreshes.set(sites_filter["refreshed"])
        for name, index in services.ban_indexes():
            m.banlist_filter_refresh_failures.labels(name).set(index.filter_state["failures"])
        states = sync_states(services)
        banlist = states["banlist"]
        m.banlist_digest.version = lambda: banlist.details.get("digest")
        m.banlist_staleness.set(banlist.staleness_seconds)
        m.banlist_epoch.set(banlist.epoch / 1000)  # Redis's epoch is in milliseconds
        m.banlist_in_sync.set(1 if banlist.in_sync else 0)
        m.banlist_diverged.set(1 if banlist.diverged else 0)
        for name, state in states.items():
            m.redis_in_sync.labels(name).set(1 if state.in_sync else 0)
            m.redis_diverged.labels(name).set(1 if state.diverged else 0)
            m.redis_staleness.labels(name).set(state.staleness_seconds)
        m.rule_processes(services.executor.state())
        audit = services.audit_log  # with one process, read at scrape time (set_function)
        if m.multiprocess_dir is not None and audit is not None:
            m.audit_failing.set(1 if audit.failing() else 0)

    return set_gauges


@router.get("/metrics", response_class=Response, responses={200: {
    "description": "Prometheus text exposition",
    "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics(services: Wired) -> Response:
    """Prometheus text exposition; answers without waiting on Redis for more than a moment.

    With several workers it is the whole service's, whichever worker answers."""
    m = services.metrics
    m.refresh(gauges(services))
    counts, _ = await services.sanction_hosts.get()  # the last good reading
    for sanction_state, count in (counts or {}).items():
        m.sanction_hosts.labels(sanction_state).set(count)
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
