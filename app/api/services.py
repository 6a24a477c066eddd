"""The services one app (or `rearrange run`) holds, built from settings in one place.

`build_services` makes every long-lived object and hands each the others it needs as
parameters; nothing is set on an object after it is made. The routes reach them through
`deps.py` (the app's `state.services`), the request path through `Services.rearranger`.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.api.auth import Authenticator
from app.banlist import bulk
from app.banlist.base import BanStore
from app.banlist.embedded.store import EmbeddedStore
from app.banlist.index import BanIndex
from app.banlist.redis.durable import Durability
from app.banlist.redis.policy import EvictionPolicy
from app.banlist.redis.store import RedisStore
from app.banlist.review import Reviews
from app.config.load import Engine
from app.config.replica import ConfigReplica
from app.config.settings import Settings
from app.config.spec import python_rules
from app.config.versions import ConfigHolder
from app.engine.executor import Limits, RuleExecutor
from app.engine.service import Rearranger
from app.errors import StartupRefused
from app.experiments.feedback import FeedbackStore, MemoryImpressions
from app.experiments.feedback_redis import RedisImpressions
from app.observability.audit import AuditLog
from app.observability.metrics import Metrics
from app.observability.readings import LastReading
from app.replay.capture import Capture, capture_settings
from app.sanctions.machine import Thresholds
from app.sanctions.service import Sanctions
from app.sanctions.states import FileStates, HostStates, RedisStates

log = logging.getLogger("rearrange")


@dataclass(frozen=True, slots=True)
class Services:
    """Everything the routes, the housekeeping and the request path use, made once."""

    settings: Settings
    metrics: Metrics
    store: BanStore  # the banlist
    quarantine: BanStore  # the sanctions' quarantine list, a store like the banlist
    review: Reviews  # high-impact bans waiting for a second person, in a store of their own
    sanctions: Sanctions
    config: ConfigHolder
    executor: RuleExecutor
    rearranger: Rearranger  # /v1/rerank's one call into the engine
    sanction_hosts: LastReading[dict[str, int]]  # /metrics never waits on Redis for long
    auth: Authenticator  # who holds a bearer token: static tokens and JWTs
    # interleaved pages waiting for their feedback, and the tallies (POST /v1/feedback)
    impressions: FeedbackStore
    audit_log: AuditLog | None = None
    capture: Capture | None = None
    redis_policy: EvictionPolicy | None = None  # with REDIS_URL: Redis's maxmemory-policy
    # set on shutdown so /readyz turns false before the last request
    draining: threading.Event = field(default_factory=threading.Event)

    def ban_indexes(self) -> list[tuple[str, BanIndex]]:
        """The banlist indexes served, by name (what the housekeeping and gauges go over)."""
        return [("banlist", self.store.index), ("quarantine", self.quarantine.index)]

    def close(self) -> None:
        """Close everything that holds a thread, a file or a connection, in the reverse
        order of their making; each closes even if one before it fails."""
        with contextlib.ExitStack() as closing:  # callbacks run last-in, first-out
            closing.callback(self.sanction_hosts.close)
            closing.callback(self.sanctions.states.close)
            closing.callback(self.quarantine.close)
            closing.callback(self.review.pending.close)
            closing.callback(self.store.close)
            closing.callback(self.impressions.close)  # before the store: it uses its client
            if self.audit_log is not None:
                closing.callback(self.audit_log.close)
            if self.capture is not None:
                closing.callback(self.capture.close)
            closing.callback(self.config.close)  # first: it uses the store's client
            closing.callback(self.executor.close)


def build_services(settings: Settings, metrics: Metrics | None = None,
                   clock: Callable[[], float] | None = None) -> Services:
    """Every service, built from settings (the app's and `rearrange run`'s); `clock`
    (monotonic seconds) is what requests' arrival and deadline are read on, and the JWT
    keys' refresh and cooldown, the process's monotonic clock when None
    (app/engine/service.py `Rearranger`)."""
    metrics = metrics or Metrics(multiprocess_dir=settings.metrics_dir)
    # first: a bad JWKS file starts nothing
    auth = Authenticator.of(settings, metrics, clock or time.monotonic)
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
    capture = None
    if settings.capture_path is not None:
        capture = Capture(capture_settings(settings),
                          lambda reason: metrics.capture_dropped.labels(reason).inc(),
                          metrics.capture_written.inc)
    executor = RuleExecutor(Limits(workers=settings.python_rule_workers,
                                   timeout=settings.python_rule_timeout_ms / 1000), metrics)

    def rule_processes(engine: Engine) -> None:
        """Before a config with plugins is served, its rule processes import them and build
        its rules (a failure is logged and counted by the executor, which goes on trying;
        the config is served, its Python rules failing by their on_error meanwhile)."""
        executor.prepare(engine.plugins, python_rules(engine))

    config.prepare_with(rule_processes)
    quarantine, sanctions = _sanctions(settings, store, metrics, policy, durability)
    review = _reviews(settings, store, metrics, policy, durability)
    # interleaved pages served (both request paths hand them here), kept for their feedback
    impressions: FeedbackStore = (
        RedisImpressions(store.client, settings.banlist_redis_prefix,
                         settings.feedback_window_seconds, settings.feedback_max_bytes, metrics)
        if isinstance(store, RedisStore) else
        MemoryImpressions(settings.feedback_window_seconds, settings.feedback_max_bytes,
                          metrics))
    rearranger = Rearranger(settings, store, quarantine, config, executor, audit_log=audit,
                            capture=capture, clock=clock, impressions=impressions,
                            impressions_dropped=metrics.impressions_lost.labels(
                                "sink_failed").inc)
    return Services(settings=settings, metrics=metrics, store=store, quarantine=quarantine,
                    review=review, impressions=impressions,
                    sanctions=sanctions, config=config, executor=executor,
                    rearranger=rearranger, audit_log=audit, capture=capture,
                    redis_policy=policy, auth=auth,
                    sanction_hosts=LastReading("sanction_hosts", sanctions.counts, metrics))


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
    return quarantine, Sanctions(states, banlist, quarantine, thresholds, metrics,
                                 appeal_pin_seconds=settings.sanctions_appeal_pin_days * 86400)


def _reviews(settings: Settings, banlist: BanStore, metrics: Metrics,
             policy: EvictionPolicy | None, durability: Durability | None) -> Reviews:
    """The review list (a store like the banlist, replicated the same way, never read by
    the request path) and the rule that sends high-impact bans to it, weighed by this
    process's traffic counts."""
    pending = build_store(settings, metrics, list_name="review", policy=policy,
                          durability=durability)
    pending.start()
    traffic = metrics.engine_metrics

    def weighed(key: str) -> tuple[int, int]:
        count, requests = traffic.traffic_share(key, time.time())
        return int(count), int(requests)

    review = Reviews(banlist, pending, weighed, settings.ban_review_share, time.time,
                     lambda outcome: metrics.ban_reviews.labels(outcome).inc())
    if metrics.multiprocess_dir is None:  # one process: read at scrape time
        metrics.ban_reviews_waiting.set_function(
            lambda: pending.index.active_count(time.time()))
    return review


def build_store(settings: Settings, metrics: Metrics, list_name: str = "banlist",
                policy: EvictionPolicy | None = None,
                durability: Durability | None = None) -> BanStore:
    """The Redis-backed replica with REDIS_URL, else the embedded store (the default).

    `list_name` other than "banlist" (the sanctions quarantine, the review list) gets its
    own keys, log and snapshot beside the banlist's; the rearrange_banlist_* counters count
    every list, the rearrange_redis_* series tell them apart. `policy`: the eviction check
    Redis users share; `durability`: how many replicas their writes wait for (both built
    from settings if None).
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
