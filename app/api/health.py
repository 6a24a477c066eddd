"""Liveness, readiness and Prometheus metrics."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app import __version__
from app.api.deps import Service
from app.api.strict import StrictRoute
from app.banlist.base import SyncState
from app.engine.service import Rearranger
from app.observability.metrics import Metrics

router = APIRouter(tags=["health"], route_class=StrictRoute)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive, and which release it runs."""
    return {"status": "ok", "version": __version__}


def sync_states(service: Rearranger) -> dict[str, SyncState]:
    """How each copy this replica holds relates to its source of truth, by structure."""
    states = {"banlist": service.store.sync_state()}
    if service.quarantine is not None:
        states["quarantine"] = service.quarantine.sync_state()
    if service.sanctions is not None:
        states["sanctions"] = service.sanctions.states.sync_state()
    return states


@router.get("/readyz", responses={503: {
    "description": "not ready (no config, a list not loaded yet, or draining): the same body"}})
async def readyz(service: Service) -> JSONResponse:
    """Ready when a config is loaded and a copy of each list is held (503 otherwise).

    A replica that lost Redis, or refuses what Redis holds (older, lost, forked), stays
    ready: it serves its last copy, and the body says how stale it is and why, per
    structure (`banlist_*`, `quarantine_*`, `sanctions_*`). Taking every replica out of the
    load balancer because Redis hiccuped would turn a banlist delay into an outage.
    """
    draining = service.draining
    states = sync_states(service)
    loaded = all(s.details.get("loaded", True) for s in states.values())
    # a copy lacking changes Redis lost, while another replica holds them, serves no traffic
    complete = all(s.missing is None for s in states.values())
    body: dict[str, Any] = {
        "ready": not draining and loaded and complete,
        "config_version": service.config.engine.version,
        "banlist_version": service.store.version,
        "banlist_entries": len(service.store),
    }
    if service.quarantine is not None:
        body["quarantine_version"] = service.quarantine.version
        body["quarantine_entries"] = len(service.quarantine)
    for name, state in states.items():
        body.update(state.as_dict(name))
    policy = service.redis_policy
    if policy is not None:
        body["redis_maxmemory_policy"] = policy.policy
        body["redis_policy_problem"] = policy.problem or policy.unchecked
    body["draining"] = draining
    # Stuck Python rules: the replica still serves (every replica would have them), but a
    # restart is due once `at_cap` (docs/config.md#python-rules)
    body["python_rules"] = service.executor.state()
    return JSONResponse(body, status_code=200 if body["ready"] else 503)


def gauges(service: Rearranger) -> Callable[[Metrics], None]:
    """What sets the service-state gauges of `service` (read from memory, never Redis)."""

    def set_gauges(m: Metrics) -> None:
        store = service.store
        m.banlist_entries.set(len(store))
        m.banlist_version.set(store.version)
        for scope, n in store.index.counts.items():
            m.banlist_scope_entries.labels(scope).set(n)
        sites_filter = store.index.filter_state
        m.banlist_filter_gone.set(sites_filter["gone"])
        m.banlist_filter_refreshes.set(sites_filter["refreshed"])
        for name, index in service.ban_indexes():
            m.banlist_filter_refresh_failures.labels(name).set(index.filter_state["failures"])
        states = sync_states(service)
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
        m.rule_threads(service.executor.state())
        audit = service.audit_log  # with one process, read at scrape time (set_function)
        if m.multiprocess_dir is not None and audit is not None:
            m.audit_failing.set(1 if audit.failing() else 0)

    return set_gauges


@router.get("/metrics", response_class=Response, responses={200: {
    "description": "Prometheus text exposition",
    "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics(request: Request, service: Service) -> Response:
    """Prometheus text exposition; answers without waiting on Redis for more than a moment.

    With several workers it is the whole service's, whichever worker answers."""
    m = service.metrics
    m.refresh(gauges(service))
    counts, _ = await request.app.state.sanction_hosts.get()  # the last good reading
    for sanction_state, count in (counts or {}).items():
        m.sanction_hosts.labels(sanction_state).set(count)
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
