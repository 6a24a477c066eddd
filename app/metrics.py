"""Every Prometheus metric, on an explicit registry; label values come only from config.

A request touches many series (one per rule call): the Rust engine keeps them itself
(app._engine.EngineMetrics, one lock per request, no Python call per request) and
`EngineCollector` exports them as standard families at scrape time. The series of the
control plane (banlist, replication, config reloads, HTTP responses) are prometheus_client's.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from app import _engine
from app.capture import DROP_REASONS
from app.srm import srm

RELOAD_RESULTS = ("changed", "unchanged", "refused")  # rearrange_config_reloads_total
CONFIG_REDIS_OPS = ("publish", "follow")  # rearrange_config_redis_errors_total
# rearrange_banlist_resyncs_total: the replica's causes and the operator's (seed, adopt)
RESYNC_CAUSES = ("start", "gap", "epoch", "reseed", "seed", "adopt")
HOUSEKEEPING_TASKS = ("config", "sweep", "sanctions")  # rearrange_housekeeping_errors_total
# What the service keeps in Redis (the `structure` label of rearrange_redis_*), and why a
# replica refused what Redis holds of one (rearrange_redis_refusals_total{cause})
STRUCTURES = ("banlist", "quarantine", "sanctions")
REFUSAL_CAUSES = ("lost", "backward", "fork")
POLICY_RESULTS = ("noeviction", "evicting", "unknown")  # rearrange_redis_policy_checks_total
RERANK_ROUTE = "/v1/rerank"
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RULE_BUCKETS = (0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05)
# Magnitudes, with the sign in a `direction` label (up/down), so _sum stays a counter.
POSITION_BUCKETS = (1, 2, 3, 5, 10, 20, 50)
SCORE_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 50)
TOP = 10  # the window of the per-rule position and churn figures (crates/engine effects.rs)
CHURN_BUCKETS = tuple(range(TOP + 1))  # a call's churn n is counted at index n


class _Srm:
    """`rearrange_experiment_srm_p_value`, computed at scrape time from the counts."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.designs: Callable[[], Mapping[str, Mapping[str, int]]] = dict

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("rearrange_experiment_srm_p_value", "", labels=["experiment"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "rearrange_experiment_srm_p_value",
            "Chi-square p-value of assignments against configured weights (< 0.001: SRM)",
            labels=["experiment"])
        counts = self.metrics.assignment_counts()
        for result in srm(counts, self.designs()):
            if result.p_value is not None:
                family.add_metric([result.experiment], result.p_value)
        yield family


class _ConfigInfo:
    """`rearrange_config_info{version="…"} 1`: the config version served, read at scrape
    time (one series, never none or two mid-swap)."""

    def __init__(self) -> None:
        self.version: Callable[[], str | None] = lambda: None  # set by the ConfigHolder

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("rearrange_config_info", "", labels=["version"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("rearrange_config_info",
                                   "The config version served (always 1)", labels=["version"])
        version = self.version()
        if version is not None:
            family.add_metric([version], 1)
        yield family


# The per-request families the Rust engine keeps (app._engine.EngineMetrics): name without
# `_total` → (help, label names). Read at scrape time by EngineCollector.
ENGINE_COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rearrange_requests_total": ("Rerank requests by outcome", ("profile", "outcome")),
    "rearrange_rule_actions": ("Audit records by rule, phase, action, mode and profile",
                               ("rule", "phase", "action", "mode", "profile")),
    "rearrange_fallbacks_total": ("Pages emptied by filters", ("rule", "action")),
    "rearrange_experiment_assignments_total": (
        "Requests by experiment and variant (QA-forced ones excluded)",
        ("experiment", "variant")),
    "rearrange_rule_skipped_total": (
        "Optional rules skipped by the deadline: not started (reason: deadline) or "
        "given up midway (reason: deadline (stopped while running)); rules that failed "
        "under on_error open (reason: error)", ("rule", "phase", "reason")),
    "rearrange_rule_errors_total": ("Rule failures (raised, panicked or refused output)",
                                    ("rule", "phase")),
}
ENGINE_HISTOGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rearrange_request_duration_seconds": ("Rerank handling time (decode to encode)",
                                           ("profile",)),
    "rearrange_rule_duration_seconds": ("Time per rule call, applied or shadow",
                                        ("rule", "phase", "mode")),
    "rearrange_rule_position_change": (
        "Positions moved by each document in the top 10 after a rule that moved it "
        "(shadow: would have moved)", ("rule", "mode", "direction")),
    "rearrange_rule_score_change": ("Size of each rescore by a rule (shadow: would be)",
                                    ("rule", "mode", "direction")),
    "rearrange_rule_top10_churn": (
        "Documents a rule brought into the top 10 (would have, in shadow), per rule call",
        ("rule", "mode")),
}


class EngineCollector(Collector):
    """The engine's per-request series, exported from one `snapshot()` per scrape."""

    def __init__(self, engine_metrics: Any) -> None:
        self.engine_metrics = engine_metrics

    def describe(self) -> Iterator[Metric]:
        for name, (doc, labels) in ENGINE_COUNTERS.items():
            yield CounterMetricFamily(name, doc, labels=list(labels))
        for name, (doc, labels) in ENGINE_HISTOGRAMS.items():
            yield HistogramMetricFamily(name, doc, labels=list(labels))

    def collect(self) -> Iterator[Metric]:
        snap = self.engine_metrics.snapshot()
        for name, (doc, labels) in ENGINE_COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=list(labels))
            for key, value in snap["counters"].get(name, ()):
                family.add_metric(list(key), value)
            yield family
        for name, (doc, labels) in ENGINE_HISTOGRAMS.items():
            family = HistogramMetricFamily(name, doc, labels=list(labels))
            bounds = snap["bounds"].get(name, ())
            for key, counts, total in snap["histograms"].get(name, ()):
                cumulative, buckets = 0, []
                for bound, count in zip((*bounds, float("inf")), counts, strict=True):
                    cumulative += count
                    buckets.append(("+Inf" if bound == float("inf") else repr(bound),
                                    cumulative))
                family.add_metric(list(key), buckets, total)
            yield family


class _EngineRequests:
    """`requests.labels(profile, outcome).inc()` for the outcomes decided in Python."""

    def __init__(self, engine_metrics: Any) -> None:
        self.engine_metrics = engine_metrics

    def labels(self, profile: str, outcome: str) -> Any:
        count = self.engine_metrics.count_request

        class _Child:
            def inc(self) -> None:
                count(profile, outcome)

        return _Child()


class Metrics:
    """The service's metrics; label children are cached so a request does few lookups.

    `engine_metrics` (app._engine.EngineMetrics, a new one by default) holds the
    per-request series; every engine built from a config counts into it.
    """

    def __init__(self, registry: CollectorRegistry | None = None,
                 engine_metrics: Any = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.engine_metrics = (engine_metrics if engine_metrics is not None
                               else _engine.EngineMetrics())
        self._init_engine(self.engine_metrics)
        self._init_common()

    def _init_engine(self, engine_metrics: Any) -> None:
        self.registry.register(EngineCollector(engine_metrics))  # type: ignore[arg-type]
        self.requests = _EngineRequests(engine_metrics)
        self.srm = _Srm(self)
        self.registry.register(self.srm)  # type: ignore[arg-type]

    def _init_common(self) -> None:
        r = self.registry
        self.http_responses = Counter(
            "rearrange_http_responses_total", "HTTP responses by route and status class",
            ["route", "code"], registry=r)
        self.banlist_entries = Gauge("rearrange_banlist_entries", "Banlist entries held",
                                     registry=r)
        self.banlist_version = Gauge("rearrange_banlist_version", "Banlist version served",
                                     registry=r)
        self.banlist_staleness = Gauge(
            "rearrange_banlist_staleness_seconds",
            "Seconds since this replica last confirmed it holds Redis's latest banlist "
            "(0 for the embedded store)",
            registry=r)
        self.banlist_scope_entries = Gauge("rearrange_banlist_entries_by_scope",
                                           "Banlist entries held, by scope", ["scope"],
                                           registry=r)
        self.banlist_epoch = Gauge("rearrange_banlist_epoch",
                                   "Epoch of the banlist history served (ms of its creation)",
                                   registry=r)
        self.banlist_in_sync = Gauge("rearrange_banlist_in_sync",
                                     "1 while this replica follows its source of truth",
                                     registry=r)
        self.banlist_diverged = Gauge(
            "rearrange_banlist_diverged",
            "1 while Redis holds an older or different banlist than this replica (alert)",
            registry=r)
        self.banlist_lag = Histogram(
            "rearrange_banlist_replication_lag_seconds",
            "Time from a change's commit in Redis to its apply on this replica",
            buckets=LAG_BUCKETS, registry=r)
        self.banlist_resyncs = Counter("rearrange_banlist_resyncs_total",
                                       "Full resyncs of this replica, by cause", ["cause"],
                                       registry=r)
        self.banlist_backward_refused = Counter(
            "rearrange_banlist_backward_refused_total",
            "Times Redis offered a banlist older than (or diverging from) this replica's "
            "copy and it was refused", registry=r)
        self.banlist_redis_errors = Counter("rearrange_banlist_redis_errors_total",
                                            "Failed Redis round trips, by operation", ["op"],
                                            registry=r)
        self._init_redis()
        self.banlist_lookups = Counter("rearrange_banlist_lookups_total",
                                       "Banlist lookups (API) by outcome", ["outcome"],
                                       registry=r)
        self.config_reloads = Counter(
            "rearrange_config_reloads_total",
            "Config loads (file, reload route, rollback, another replica's change) by result",
            ["result"], registry=r)
        self.config_info = Gauge("rearrange_config_loaded_timestamp_seconds",
                                 "When the config in use was loaded", registry=r)
        self.config_version = _ConfigInfo()
        r.register(self.config_version)  # type: ignore[arg-type]
        self.config_redis_errors = Counter(
            "rearrange_config_redis_errors_total",
            "Failed Redis round trips of config sharing: a change not published, or the "
            "shared log not read (the config in use keeps serving)", ["op"], registry=r)
        self.housekeeping_errors = Counter(
            "rearrange_housekeeping_errors_total",
            "Unexpected errors of the background tasks (config poll, TTL sweep, sanction "
            "states check), by task",
            ["task"], registry=r)
        # Series that alerts take increase() of exist at 0 from the start: a series born at 1
        # has no earlier sample, so its first event (a refused reload) would never alert.
        for counter, values in ((self.config_reloads, RELOAD_RESULTS),
                                (self.banlist_resyncs, RESYNC_CAUSES),
                                (self.config_redis_errors, CONFIG_REDIS_OPS),
                                (self.housekeeping_errors, HOUSEKEEPING_TASKS)):
            for value in values:
                counter.labels(value)
        self.audit_dropped = Counter(
            "rearrange_audit_log_dropped_total",
            "Audit log lines dropped: writer behind, write failed, or still queued at close",
            registry=r)
        self.capture_written = Counter(
            "rearrange_capture_written_total", "Requests written to the capture file",
            registry=r)
        self.capture_dropped = Counter(
            "rearrange_capture_dropped_total", "Sampled requests not captured, by reason: "
            "queue_full, too_large, not_json, write_failed", ["reason"], registry=r)
        for reason in DROP_REASONS:
            self.capture_dropped.labels(reason)
        self.audit_failing = Gauge(
            "rearrange_audit_log_failing",
            "1 while the audit log's last write failed or its writer has stopped",
            registry=r)
        self.sanction_transitions = Counter(
            "rearrange_sanction_transitions_total", "Sanction state changes by from and to state",
            ["from_state", "to_state"], registry=r)
        self.sanction_stale = Counter(
            "rearrange_sanction_stale_observations_total",
            "Spam scores ignored because an observation at least as recent was applied",
            registry=r)
        self.sanction_hosts = Gauge("rearrange_sanction_hosts", "Hosts per sanction state",
                                    ["state"], registry=r)
        self._caches: dict[str, CacheCollector] = {}
        self._http: dict[tuple[str, str], Any] = {}
        for code in ("2xx", "4xx", "5xx"):  # the server-errors alert's ratio, from the start
            self.http_response_series(RERANK_ROUTE, code)

    def _init_redis(self) -> None:
        r = self.registry
        self.redis_in_sync = Gauge(
            "rearrange_redis_in_sync", "1 while this replica's copy of a structure follows "
            "Redis (always 1 embedded)", ["structure"], registry=r)
        self.redis_diverged = Gauge(
            "rearrange_redis_diverged", "1 while Redis holds an older or other copy of a "
            "structure than this replica, or a forked changelog, and it is refused (alert)",
            ["structure"], registry=r)
        self.redis_staleness = Gauge(
            "rearrange_redis_staleness_seconds", "Seconds since this replica last confirmed "
            "its copy of a structure equal to Redis's (0 embedded)", ["structure"], registry=r)
        self.redis_refusals = Counter(
            "rearrange_redis_refusals_total", "Times what Redis held of a structure was "
            "refused: lost (Redis empty), backward (older or another history), fork "
            "(rewritten history)", ["structure", "cause"], registry=r)
        self.redis_reading_age = Gauge(
            "rearrange_redis_reading_age_seconds", "Age of the last successful reading behind "
            "series that need Redis (reading=sanction_hosts: rearrange_sanction_hosts)",
            ["reading"], registry=r)
        self.redis_policy_checks = Counter(
            "rearrange_redis_policy_checks_total", "Checks of Redis's maxmemory-policy by "
            "result (unknown: CONFIG GET refused)", ["result"], registry=r)
        self.redis_evicting = Gauge(
            "rearrange_redis_evicting", "1 while Redis's maxmemory-policy is not noeviction "
            "(writes to Redis suspended; alert)", registry=r)
        for structure in STRUCTURES:
            for cause in REFUSAL_CAUSES:
                self.redis_refusals.labels(structure, cause)
        for result in POLICY_RESULTS:
            self.redis_policy_checks.labels(result)

    def track_caches(self, kind: str, caches: Callable[[], Iterable[CacheStats]]) -> None:
        """Export the near_duplicates caches of `kind` that `caches()` lists at each scrape.

        `kind` is "signature" or "shingle" (`CACHE_KINDS`). `caches` yields the engine's
        `cache_stats()` rows (profile, kind, hits, misses, evictions, entries, bytes) of the
        config in use; read at scrape time, so the request path does no metrics work for
        the caches and a reload (new rules, new caches, counters from zero, as after a
        restart) needs no re-registration.
        """
        collector = self._caches.get(kind)
        if collector is None:
            collector = self._caches[kind] = CacheCollector(kind, caches)
            self.registry.register(collector)
        else:
            collector.caches = caches

    def assignment_counts(self) -> dict[tuple[str, str], float]:
        """(experiment, variant) → requests assigned since start, read from the counter."""
        counts = self.engine_metrics.snapshot()["counters"]
        return {tuple(k): v for k, v in counts.get("rearrange_experiment_assignments_total", ())}

    def http_response(self, route: str, status: int) -> None:
        """Count one HTTP response by route template and status class (2xx, 4xx, 5xx)."""
        key = (route, f"{status // 100}xx")
        child = self._http.get(key)
        if child is None:
            child = self.http_response_series(*key)
        child.inc()

    def http_response_series(self, route: str, code: str) -> Any:
        """The counter child of (route, status class), remembered for the next response."""
        child = self._http[(route, code)] = self.http_responses.labels(route, code)
        return child


# (profile, kind, hits, misses, evictions, entries, bytes): app._engine.Engine.cache_stats()
CacheStats = tuple[str, str, int, int, int, int, int]
# kind → (what the cache holds, how a miss is computed), for the families' help texts
CACHE_KINDS = {
    "signature": ("near_duplicates signatures", "computed from text"),
    "shingle": ("near_duplicates exact shingle sets", "shingled from text"),
}


class CacheCollector(Collector):
    """Hits, misses, evictions, entries and bytes of each profile's caches of one kind:
    `rearrange_<kind>_cache_*`."""

    def __init__(self, kind: str, caches: Callable[[], Iterable[CacheStats]]) -> None:
        self.kind = kind
        self.caches = caches

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """One sample per profile (caches of one profile summed)."""
        totals: dict[str, list[int]] = {}
        for profile, kind, *values in self.caches():
            if kind != self.kind:
                continue
            t = totals.setdefault(profile, [0, 0, 0, 0, 0])
            for n, value in enumerate(values):
                t[n] += value
        held, missed = CACHE_KINDS[self.kind]
        name = f"rearrange_{self.kind}_cache"
        families = [
            CounterMetricFamily(f"{name}_hits", f"{held} found in the cache",
                                labels=["profile"]),
            CounterMetricFamily(f"{name}_misses", f"{held} {missed}", labels=["profile"]),
            CounterMetricFamily(f"{name}_evictions", f"{held} dropped to stay under the "
                                "cache's size", labels=["profile"]),
            GaugeMetricFamily(f"{name}_entries", f"{held} held", labels=["profile"]),
            GaugeMetricFamily(f"{name}_bytes", f"Approximate bytes held by the {self.kind} "
                              "cache", labels=["profile"]),
        ]
        for profile, values in sorted(totals.items()):
            for family, value in zip(families, values, strict=True):
                family.add_metric([profile], value)
        yield from families
