"""create_app(settings): wires store, config, pipeline and routers; nothing else."""
from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send
from uvicorn.logging import DefaultFormatter

from app import __version__
from app.api import (
    admin,
    banlist,
    errors,
    experiments,
    health,
    inspector,
    openapi,
    rerank,
    sanctions,
)
from app.api.observe import BodyLimit, ResponseCounter
from app.banlist import bulk
from app.banlist.base import BanStore
from app.banlist.embedded.store import EmbeddedStore
from app.banlist.index import FilterKeeper
from app.banlist.redis.durable import Durability
from app.banlist.redis.policy import EvictionPolicy
from app.banlist.redis.store import RedisStore
from app.config.replica import ConfigReplica
from app.config.settings import Settings
from app.config.versions import ConfigHolder
from app.engine.executor import Limits, RuleExecutor
from app.engine.service import Rearranger
from app.errors import ConfigError, StartupRefused
from app.observability.audit import AuditLog
from app.observability.logs import OneLineRecords
from app.observability.metrics import Metrics
from app.observability.readings import LastReading
from app.replay.capture import Capture, capture_settings
from app.sanctions.machine import Thresholds
from app.sanctions.service import Sanctions
from app.sanctions.states import FileStates, HostStates, RedisStates

log = logging.getLogger("rearrange")


def build_service(settings: Settings, metrics: Metrics | None = None) -> Rearranger:
    """Everything a request needs, built from settings (also used by `rearrange run`)."""
    metrics = metrics or Metrics(multiprocess_dir=settings.metrics_dir)
    policy = EvictionPolicy(metrics) if settings.redis_url else None
    durability = (Durability(metrics, settings.redis_wait_replicas, settings.redis_wait_ms)
                  if settings.redis_url else None)
    store = build_store(settings, metrics, policy=policy, durability=durability)
    store.start()
    if policy is not None and policy.problem:  # checked on the first connect, in start()
        store.close()
        raise StartupRefused(policy.problem)
    if settings.banlist_seed is not None and store.version == 0:
        groups, specs = bulk.read_file(settings.banlist_seed)
        added = store.seed(specs, groups=groups)
        log.info("banlist: seeded %d entries and %d groups from %s", added, len(groups),
                 settings.banlist_seed)
    config = ConfigHolder(settings.config, metrics, metrics.engine_metrics)
    if isinstance(store, RedisStore):  # config changes reach every replica, as bans do
        ConfigReplica(store.client, settings.banlist_redis_prefix, config, metrics,
                      settings.banlist_block_seconds).start()
    metrics.srm.designs = lambda: config.engine.designs()  # the config in use at scrape time
    for kind in ("signature", "shingle"):
        metrics.track_caches(kind, lambda: config.engine.core.cache_stats())
    audit = None
    if settings.audit_log:
        audit = AuditLog(settings.audit_log, metrics.audit_dropped.inc)
        if metrics.multiprocess_dir is None:  # one process: read at scrape time
            metrics.audit_failing.set_function(audit.failing)
    limits = Limits(workers=settings.python_rule_workers,
                    timeout=settings.python_rule_timeout_ms / 1000,
                    grace=settings.python_rule_grace_ms / 1000,
                    abandoned_max=settings.python_rule_abandoned_max)
    service = Rearranger(settings, store, config, metrics, audit,
                         executor=RuleExecutor(limits, metrics))
    if settings.capture_path is not None:
        service.capture = Capture(capture_settings(settings),
                                  lambda reason: metrics.capture_dropped.labels(reason).inc(),
                                  metrics.capture_written.inc)
    service.redis_policy = policy
    service.quarantine, service.sanctions = _sanctions(settings, store, metrics, policy,
                                                       durability)
    return service


def _sanctions(settings: Settings, banlist: BanStore, metrics: Metrics,
               policy: EvictionPolicy | None,
               durability: Durability | None) -> tuple[BanStore, Sanctions]:
    """The quarantine list (a store like the banlist, replicated the same way) and the
    state machine that feeds both; host states live beside them (Redis or a local file)."""
    quarantine = build_store(settings, metrics, list_name="quarantine", policy=policy,
                             durability=durability)
    quarantine.start()
    if isinstance(banlist, RedisStore):
        states: HostStates = RedisStates(banlist.client, settings.banlist_redis_prefix,
                                         metrics, banlist.policy, banlist.durability,
                                         block_seconds=settings.banlist_block_seconds)
        states.start()  # follows Redis's epoch and writes from now on (follower.py)
    else:
        beside = settings.banlist_path
        states = FileStates(beside.with_name("sanctions.jsonl") if beside else None)
    thresholds = Thresholds(
        quarantine_enter=settings.sanctions_quarantine_enter,
        quarantine_exit=settings.sanctions_quarantine_exit,
        ban_enter=settings.sanctions_ban_enter, ban_exit=settings.sanctions_ban_exit)
    return quarantine, Sanctions(states, banlist, quarantine, thresholds, metrics)


def build_store(settings: Settings, metrics: Metrics, list_name: str = "banlist",
                policy: EvictionPolicy | None = None,
                durability: Durability | None = None) -> BanStore:
    """The Redis-backed replica with REDIS_URL, else the embedded store (the default).

    `list_name` other than "banlist" (the sanctions quarantine) gets its own keys, log and
    snapshot beside the banlist's; the rearrange_banlist_* counters count both lists, the
    rearrange_redis_* series tell them apart. `policy`: the eviction check Redis users share;
    `durability`: how many replicas their writes wait for (both built from settings if None).
    """
    own = list_name == "banlist"
    if not settings.redis_url:
        path = settings.banlist_path
        return EmbeddedStore(path if own or path is None else path.with_name(f"{list_name}.jsonl"),
                             read_only=settings.banlist_read_only,
                             snapshot_seconds=settings.banlist_snapshot_seconds,
                             events=metrics, name=list_name)
    snapshot = settings.banlist_snapshot_path
    if not own and snapshot is not None:
        snapshot = snapshot.with_name(f"{list_name}.snapshot.json")
    prefix = settings.banlist_redis_prefix + ("" if own else f"{list_name}:")
    return RedisStore(settings.redis_url, metrics, snapshot, prefix=prefix,
                      retention_seconds=settings.banlist_retention_seconds,
                      history_seconds=settings.banlist_history_days * 86400,
                      block_seconds=settings.banlist_block_seconds,
                      snapshot_seconds=settings.banlist_snapshot_seconds, name=list_name,
                      policy=policy, durability=durability or Durability(
                          metrics, settings.redis_wait_replicas, settings.redis_wait_ms),
                      # the quarantine list is small: it reads Redis
                      bootstrap_url=settings.banlist_bootstrap_url if own else None,
                      timeout_seconds=settings.redis_timeout_seconds,
                      connect_timeout_seconds=settings.redis_connect_timeout_seconds)


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


def create_app(settings: Settings | None = None) -> FastAPI:
    """The ASGI app; reads the environment when no settings are given."""
    settings = settings or Settings()
    configure_logging(settings.log_level)
    service = build_service(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: RearrangeApp) -> AsyncIterator[None]:
        task = asyncio.create_task(_housekeeping(service, settings.config_poll_seconds))
        gc.collect()
        gc.freeze()  # start-up objects live forever: keep them out of every collection
        app.probe_telemetry()
        try:
            yield
        finally:
            service.draining = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.ExitStack() as closing:  # each closes even if one before fails
                closing.callback(app.state.sanction_hosts.close)
                if service.sanctions is not None:
                    closing.callback(service.sanctions.states.close)
                if service.quarantine is not None:  # callbacks run last-in, first-out
                    closing.callback(service.quarantine.close)
                closing.callback(service.store.close)
                if service.audit_log is not None:
                    closing.callback(service.audit_log.close)
                if service.capture is not None:
                    closing.callback(service.capture.close)
                closing.callback(service.config.close)  # first: it uses the store's client
                closing.callback(service.executor.close)

    app = RearrangeApp(title="Rearrange", version=__version__, lifespan=lifespan,
                       summary="Post-ranking rule pipeline over a search result page",
                       docs_url=None, redoc_url=None)  # openapi.install serves them offline
    app.state.service = service
    app.state.tokens = settings.tokens()
    # /metrics never waits on Redis for long: the host counts are the last good reading
    assert service.sanctions is not None, "build_service sets up the sanctions"
    app.state.sanction_hosts = LastReading("sanction_hosts", service.sanctions.counts,
                                           service.metrics)
    for module in (rerank, banlist, sanctions, admin, health, experiments, inspector):
        app.include_router(module.router)
    errors.install(app)
    # Each added goes outside the ones before: from the outside in, the counter, the fast
    # path (it reads its own body), the routed endpoints' body cap. Added later, wraps all.
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes,
                       timeout=settings.body_timeout_seconds)
    app.add_middleware(rerank.FastPath, service=service)
    app.add_middleware(ResponseCounter, metrics=service.metrics)
    openapi.install(app, settings.banlist_read_auth)
    return app


def configure_logging(level: str) -> None:
    """Our loggers ("rearrange" and the app.* modules) write to stderr as uvicorn's do.

    uvicorn configures only its own loggers. Ours propagated to a root logger without a
    handler, where Python's last resort printed warnings and errors and dropped every INFO
    line (config reloaded, bans expired, resyncs). Where the root logger has a handler
    (an embedding application, pytest's log capture) it is left to do the job. Each record
    is written on one line, its traceback's lines marked `  | ` (app/observability/logs.py):
    a client's or a rule's text in it cannot forge a record.
    """
    if logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(name)s: %(message)s"))
    handler.addFilter(OneLineRecords())  # what a rule or a client wrote, escaped
    for name in ("rearrange", "app"):
        logger = logging.getLogger(name)
        logger.setLevel(level.upper())
        if not logger.handlers:
            logger.addHandler(handler)


async def _housekeeping(service: Rearranger, poll_seconds: float) -> None:
    """Hot-reload the config on file change, sweep expired bans, write an embedded store's
    snapshot when due, check sanction states, publish a banlist sites filter made again
    aside, and refresh this worker's gauges
    (another worker may answer the next scrape), once a poll interval.

    One failing step is logged and counted, and the loop goes on: a task that died here
    would silently stop both hot reload and TTL sweeps until the next restart.
    """
    if poll_seconds <= 0:
        return
    keep_filters = functools.partial(_keep_filters,
                                     {"banlist": FilterKeeper(), "quarantine": FilterKeeper()})
    while True:
        await asyncio.sleep(poll_seconds)
        for task, step in (("config", _poll_config), ("sweep", _sweep),
                           ("snapshot", _keep_snapshots), ("banlist_filter", keep_filters),
                           ("gauges", _refresh_gauges)):
            try:
                await step(service)
            except Exception:
                service.metrics.housekeeping_errors.labels(task).inc()
                log.exception("housekeeping: %s failed; retrying next poll", task)


async def _poll_config(service: Rearranger) -> None:
    if not service.config.changed_on_disk():
        return
    try:  # in a thread: with Redis, a change is published before the poll goes on
        await asyncio.to_thread(service.config.reload)
    except ConfigError as exc:
        log.error("config reload refused, still serving %s: %s",
                  service.config.engine.version, exc)


async def _sweep(service: Rearranger) -> None:
    expired = await asyncio.to_thread(service.store.sweep)  # Redis: a round trip
    if service.quarantine is not None:
        expired += await asyncio.to_thread(service.quarantine.sweep)
    if expired:
        log.info("banlist: %d entries expired", expired)


async def _keep_snapshots(service: Rearranger) -> None:
    """Write each embedded store's snapshot when it is due (EmbeddedStore.keep_snapshot), in
    a thread: the dump of a large list takes seconds, and holds no write off meanwhile."""
    for store in (service.store, service.quarantine):
        if isinstance(store, EmbeddedStore):
            await asyncio.to_thread(store.keep_snapshot)


async def _keep_filters(keepers: dict[str, FilterKeeper], service: Rearranger) -> None:
    """Publish each banlist index's sites filter made again aside once it is made, and log
    a failure to make one (`FilterKeeper`), in a thread: publishing tells the new filter
    what the batches since its snapshot changed. Never waits for the index's writer: a
    batch holding it publishes the filter itself."""
    for name, index in service.ban_indexes():
        await asyncio.to_thread(keepers[name].poll, name, index)


async def _refresh_gauges(service: Rearranger) -> None:
    service.metrics.refresh(health.gauges(service))


def __getattr__(name: str) -> Any:
    """`uvicorn app.api.app:app` builds the app from the environment on first access."""
    if name == "app":
        built = create_app()
        globals()["app"] = built
        return built
    raise AttributeError(name)
