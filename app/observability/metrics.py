"""Every Prometheus metric, on an explicit registry; label values come only from config.

A request touches many series (one per rule call): the Rust engine keeps them itself
(app._engine.EngineMetrics, one lock per request, no Python call per request) and
`EngineCollector` exports them as standard families at scrape time. The series of the
control plane (banlist, replication, config reloads, HTTP responses) are prometheus_client's.
With several workers both kinds live in files of a shared directory and every scrape sums
every worker's (app/observability/workers.py); docs/metrics.md lists every series.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from app import _engine
from app.experiments.srm import srm
from app.observability.engine import (  # noqa: F401 (CACHE_KINDS: the tests read it here)
    CACHE_KINDS,
    CacheCollector,
    CacheFiles,
    CacheStats,
    EngineCollector,
    EngineRequests,
)
from app.observability.workers import (
    CPU_FAMILY,
    BuildInfo,
    Workers,
    build_commit,
    memory_limit,
    multiprocess_on,
    own_cpu_seconds,
)
from app.observability.workers import standard as standard_collectors

# A `_created` series per counter and histogram doubles the series for a figure no alert
# or panel reads (Prometheus infers resets itself).
prometheus_client.disable_created_metrics()

RELOAD_RESULTS = ("changed", "unchanged", "refused")  # rearrange_config_reloads_total
CONFIG_REDIS_OPS = ("publish", "follow")  # rearrange_config_redis_errors_total
# rearrange_banlist_resyncs_total: the replica's causes and the operator's (seed, adopt)
RESYNC_CAUSES = ("start", "gap", "epoch", "reseed", "seed", "adopt", "recover", "digest",
                 "bootstrap")
# rearrange_housekeeping_errors_total
HOUSEKEEPING_TASKS = ("config", "sweep", "snapshot", "banlist_filter", "gauges",
                      "data_plane_writer")  # the data port's writer thread (app/api/dataplane.py)
# What the service keeps in Redis (the `structure` label of rearrange_redis_*), and why a
# replica refused what Redis holds of one (rearrange_redis_refusals_total{cause})
STRUCTURES = ("banlist", "quarantine", "sanctions")
REFUSAL_CAUSES = ("lost", "backward", "fork", "digest")
POLICY_RESULTS = ("noeviction", "evicting", "unknown")  # rearrange_redis_policy_checks_total
# A write's WAIT (app/banlist/redis/durable.py): rearrange_redis_writes_total{result}
DURABILITY_RESULTS = ("confirmed", "not_durable", "alone")
JWKS_FETCH_RESULTS = ("ok", "failed")  # rearrange_auth_jwks_fetches_total{result}
# Changes Redis lost that a replica held (app/banlist/redis/recovery.py)
RECOVERY_RESULTS = ("reapplied", "operator")
BOOTSTRAP_RESULTS = ("loaded", "failed")  # rearrange_banlist_bootstraps_total{result}
# rearrange_banlist_embedded_starts_total{result}: how an embedded store read its log
EMBEDDED_STARTS = ("snapshot", "replay", "refused")
# Why request capture (app/replay/capture.py) dropped a body: rearrange_capture_dropped_total
DROP_REASONS = ("queue_full", "too_large", "not_json", "write_failed")
RERANK_ROUTE = "/v1/rerank"
# The statuses of /v1/rerank the server-errors alert divides, at 0 from the start
RERANK_CODES = (200, 500, 503)
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


class _Info:
    """An info series, `name{label="…"} 1`: the config version served
    (`rearrange_config_info{version}`), the banlist's content digest
    (`rearrange_banlist_digest_info{digest}`).

    One process: read at scrape time (one series, never none or two mid-swap). Several
    workers: each sets its version's series to 1 in its gauge file (the old one to 0, left
    out of the scrape) at each refresh, so a scrape shows each version some worker serves.
    """

    def __init__(self, name: str, help_text: str, label: str) -> None:
        self.name, self.help, self.label = name, help_text, label
        self.version: Callable[[], str | None] = lambda: None  # what the series names now
        self.gauge: Gauge | None = None
        self._published: str | None = None

    def worker_gauge(self, registry: CollectorRegistry) -> Gauge:
        """The gauge a worker of several writes its value to (one series per value)."""
        self.gauge = Gauge(self.name, self.help, [self.label], registry=registry,
                           multiprocess_mode="livemax")
        return self.gauge

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, "", labels=[self.label])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.help, labels=[self.label])
        version = self.version()
        if version is not None:
            family.add_metric([version], 1)
        yield family

    def refresh(self) -> None:
        """Write this worker's version to its gauge file (several workers only)."""
        version = self.version()
        if self.gauge is None or version is None or version == self._published:
            return
        if self._published is not None:
            self.gauge.labels(self._published).set(0)
        self.gauge.labels(version).set(1)
        self._published = version


class Metrics:
    """The service's metrics; label children are cached so a request does few lookups.

    `engine_metrics` (app._engine.EngineMetrics, a new one by default) holds the
    per-request series; every engine built from a config counts into it. `registry` is
    what /metrics exports. `multiprocess_dir` (PROMETHEUS_MULTIPROC_DIR, set before
    prometheus_client was imported) makes this one worker of several: its series go to
    its files there, and the registry exports every worker's. It is also the stores' and
    the config's listener: they report through `StoreEvents` (app/banlist/events.py) and
    `ConfigEvents` (app/config/events.py), which these methods implement, and never import
    this module.
    """

    def __init__(self, registry: CollectorRegistry | None = None,
                 engine_metrics: Any = None, multiprocess_dir: Path | None = None) -> None:
        if multiprocess_dir is not None and not multiprocess_on():
            raise RuntimeError(
                f"metrics in {multiprocess_dir} need PROMETHEUS_MULTIPROC_DIR set before "
                "prometheus_client is imported (it picks how values are stored then)")
        self.registry = registry or CollectorRegistry()
        self.multiprocess_dir = multiprocess_dir
        # With several workers the prometheus_client series are read back from their files
        # (Workers); registered on the exported registry too, each would appear twice.
        self._own = self.registry if multiprocess_dir is None else CollectorRegistry()
        self.engine_metrics = (engine_metrics if engine_metrics is not None
                               else _engine.EngineMetrics(multiprocess_dir))
        self._init_engine(self.engine_metrics)
        self._init_common()
        infos = (self.config_version, self.banlist_digest)
        if multiprocess_dir is None:
            for series in infos:
                self.registry.register(series)
            standard_collectors(self.registry)
        else:
            for series in infos:
                series.worker_gauge(self._own)
            self.registry.register(Workers(multiprocess_dir,
                                           drop_zero=[series.name for series in infos]))
        self._worker_cpu = None if multiprocess_dir is None else Gauge(
            CPU_FAMILY, "This worker's CPU seconds (summed into process_cpu_seconds_total)",
            registry=self._own, multiprocess_mode="all")
        self.registry.register(BuildInfo(_commit(), memory_limit))

    def _init_engine(self, engine_metrics: _engine.EngineMetrics) -> None:
        self.registry.register(EngineCollector(engine_metrics))
        self.requests = EngineRequests(engine_metrics)
        self.srm = _Srm(self)
        self.registry.register(self.srm)

    def _init_common(self) -> None:
        r = self._own
        self.http_responses = Counter(
            "rearrange_http_responses_total", "HTTP responses by route and status code",
            ["route", "code"], registry=r)
        # Gauges with several workers: the newest reading (mostrecent), or the worst
        # worker's (min of in-sync flags and versions, max of staleness and alarms); a dead
        # worker's leave the scrape (live).
        self.banlist_entries = Gauge("rearrange_banlist_entries", "Banlist entries held",
                                     registry=r, multiprocess_mode="livemostrecent")
        self.banlist_version = Gauge("rearrange_banlist_version", "Banlist version served",
                                     registry=r, multiprocess_mode="livemin")
        self.banlist_staleness = Gauge(
            "rearrange_banlist_staleness_seconds",
            "Seconds since this replica last confirmed it holds Redis's latest banlist "
            "(0 for the embedded store)",
            registry=r, multiprocess_mode="livemax")
        self.banlist_scope_entries = Gauge("rearrange_banlist_entries_by_scope",
                                           "Banlist entries held, by scope", ["scope"],
                                           registry=r, multiprocess_mode="livemostrecent")
        self.banlist_filter_gone = Gauge(
            "rearrange_banlist_filter_gone_ratio",
            "Banlist names gone since the sites filter was made, per name held (it is made "
            "again at 0.25)", registry=r, multiprocess_mode="livemax")
        self.banlist_filter_refreshes = Gauge(
            "rearrange_banlist_filter_refreshes",
            "Times the banlist index served made its sites filter again",
            registry=r, multiprocess_mode="livemax")
        self.banlist_filter_refresh_failures = Gauge(
            "rearrange_banlist_filter_refresh_failures",
            "Times a banlist index served (the banlist's, the quarantine's) failed to make "
            "its sites filter again (each logged with its cause; its next batch of changes "
            "tries again)", ["index"], registry=r, multiprocess_mode="livemax")
        self.banlist_epoch = Gauge(
            "rearrange_banlist_epoch_timestamp_seconds",
            "Creation time of the banlist history served (0 for the embedded store)",
            registry=r, multiprocess_mode="livemin")
        self.banlist_in_sync = Gauge("rearrange_banlist_in_sync",
                                     "1 while this replica follows its source of truth",
                                     registry=r, multiprocess_mode="livemin")
        self.banlist_diverged = Gauge(
            "rearrange_banlist_diverged",
            "1 while Redis holds an older or different banlist than this replica (alert)",
            registry=r, multiprocess_mode="livemax")
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
        self._init_feedback()
        self.banlist_lookups = Counter("rearrange_banlist_lookups_total",
                                       "Banlist lookups (API) by outcome", ["outcome"],
                                       registry=r)
        self.config_reloads = Counter(
            "rearrange_config_reloads_total",
            "Config loads (file, reload route, rollback, another replica's change) by result",
            ["result"], registry=r)
        self.config_info = Gauge("rearrange_config_loaded_timestamp_seconds",
                                 "When the config in use was loaded", registry=r,
                                 multiprocess_mode="livemax")
        self.config_version = _Info("rearrange_config_info",
                                    "The config version served (always 1)", "version")
        self.banlist_digest = _Info(
            "rearrange_banlist_digest_info", "The content digest of the banlist this replica "
            "holds (always 1; the same on every replica holding the same content)", "digest")
        self.config_redis_errors = Counter(
            "rearrange_config_redis_errors_total",
            "Failed Redis round trips of config sharing: a change not published, or the "
            "shared log not read (the config in use keeps serving)", ["op"], registry=r)
        self.housekeeping_errors = Counter(
            "rearrange_housekeeping_errors_total",
            "Unexpected errors of the background tasks (config poll, TTL sweep, filter "
            "rebuild, gauge refresh, the data port's writer), by task",
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
        self.impressions_lost = Counter(
            "rearrange_impressions_dropped_total", "Interleaved pages served whose feedback "
            "can no longer be taken, by reason: queue_full (the data port's queue), "
            "sink_failed (the store raised), capacity (over REARRANGE_FEEDBACK_MAX_BYTES), "
            "redis_backlog (Redis unreachable too long to write them)", ["reason"],
            registry=r)
        for reason in ("queue_full", "sink_failed", "capacity", "redis_backlog"):
            self.impressions_lost.labels(reason)
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
            registry=r, multiprocess_mode="livemax")
        self.auth_failures = Counter(
            "rearrange_auth_failures_total", "Bearer tokens refused, by reason: missing, "
            "unknown_token, a JWT's (expired, wrong_issuer, bad_signature, …), "
            "insufficient_scope (403), jwks_unavailable (503)", ["reason"], registry=r)
        self.auth_jwks_fetches = Counter(
            "rearrange_auth_jwks_fetches_total", "Fetches of the JWKS (REARRANGE_ADMIN_JWKS) "
            "by result: ok, failed (logged once until one succeeds)", ["result"], registry=r)
        for result in JWKS_FETCH_RESULTS:  # at 0 from the start, for the alert's increase()
            self.auth_jwks_fetches.labels(result)
        self.ban_reviews = Counter(
            "rearrange_ban_reviews_total", "High-impact bans and their review "
            "(app/banlist/review.py), by outcome: pending (sent to review), urgent (banned at "
            "once, reviewed after), approved, rejected", ["outcome"], registry=r)
        for outcome in ("pending", "urgent", "approved", "rejected"):
            self.ban_reviews.labels(outcome)
        self.ban_reviews_waiting = Gauge(
            "rearrange_ban_reviews_waiting", "Bans waiting for a second person's review "
            "(urgent ones in effect included)", registry=r, multiprocess_mode="livemax")
        self.sanction_transitions = Counter(
            "rearrange_sanction_transitions_total", "Sanction state changes by from and to state",
            ["from_state", "to_state"], registry=r)
        self.sanction_stale_observations = Counter(
            "rearrange_sanction_stale_observations_total",
            "Spam scores ignored because an observation at least as recent was applied",
            registry=r)
        self.sanction_suppressed_observations = Counter(
            "rearrange_sanction_suppressed_observations_total",
            "Spam scores that would have quarantined or banned a host (would_be) had an "
            "appeal's pin not held it clean", ["would_be"], registry=r)
        for would_be in ("quarantine", "banned"):  # at 0 from the start, for the alert
            self.sanction_suppressed_observations.labels(would_be)
        self.sanction_hosts = Gauge("rearrange_sanction_hosts", "Hosts per sanction state",
                                    ["state"], registry=r, multiprocess_mode="livemostrecent")
        self.python_rule_events = Counter(
            "rearrange_python_rule_events_total",
            "Python rule calls that did not answer, by rule and event: timeout (past its "
            "time: the request went on without it), killed (its process killed for it), died "
            "(its process ended during the call); start_failed (rule \"\"): a rule process "
            "did not start", ["rule", "event"], registry=r)
        self.python_rule_events.labels("", "start_failed")  # at 0 from the start, for the alert
        self.python_rule_processes = Gauge(
            "rearrange_python_rule_processes",
            "Processes running Python rules by state: idle, busy, starting",
            ["state"], registry=r, multiprocess_mode="livesum")
        self._caches: dict[str, CacheCollector] = {}
        self._cache_files: dict[str, CacheFiles] = {}
        self._http: dict[tuple[str, int], Any] = {}
        for code in RERANK_CODES:  # the server-errors alert's ratio, from the start
            self.http_response_series(RERANK_ROUTE, code)

    def _init_redis(self) -> None:
        r = self._own
        self.redis_in_sync = Gauge(
            "rearrange_redis_in_sync", "1 while this replica's copy of a structure follows "
            "Redis (always 1 embedded)", ["structure"], registry=r, multiprocess_mode="livemin")
        self.redis_diverged = Gauge(
            "rearrange_redis_diverged", "1 while Redis holds an older or other copy of a "
            "structure than this replica, or a forked changelog, and it is refused (alert)",
            ["structure"], registry=r, multiprocess_mode="livemax")
        self.redis_staleness = Gauge(
            "rearrange_redis_staleness_seconds", "Seconds since this replica last confirmed "
            "its copy of a structure equal to Redis's (0 embedded)", ["structure"], registry=r,
            multiprocess_mode="livemax")
        self.redis_refusals = Counter(
            "rearrange_redis_refusals_total", "Times what Redis held of a structure was "
            "refused: lost (Redis empty), backward (older or another history), fork "
            "(rewritten history)", ["structure", "cause"], registry=r)
        self.redis_reading_age = Gauge(
            "rearrange_redis_reading_age_seconds", "Age of the last successful reading behind "
            "series that need Redis (reading=sanction_hosts: rearrange_sanction_hosts)",
            ["reading"], registry=r, multiprocess_mode="livemax")
        self.redis_policy_checks = Counter(
            "rearrange_redis_policy_checks_total", "Checks of Redis's maxmemory-policy by "
            "result (unknown: CONFIG GET refused)", ["result"], registry=r)
        self.redis_evicting = Gauge(
            "rearrange_redis_evicting", "1 while Redis's maxmemory-policy is not noeviction "
            "(writes to Redis suspended; alert)", registry=r, multiprocess_mode="livemax")
        self.redis_writes = Counter(
            "rearrange_redis_writes_total", "Writes to Redis by how they were acknowledged: "
            "confirmed (a replica holds it, WAIT), not_durable (answered 503: no replica "
            "confirmed it in time; alert), alone (the primary has no replica)",
            ["structure", "result"], registry=r)
        self.redis_wait = Histogram(
            "rearrange_redis_wait_seconds", "How long a write waited for its replicas' "
            "acknowledgement (WAIT)", ["structure"], buckets=LAG_BUCKETS, registry=r)
        self.redis_recoveries = Counter(
            "rearrange_redis_recoveries_total", "Losses of changes a replica held and Redis "
            "lost (a failover from a lagging replica, a restored backup): reapplied (written "
            "again by the replica), operator (left to a reseed; replicas not ready; alert)",
            ["structure", "result"], registry=r)
        self.redis_recovered_changes = Counter(
            "rearrange_redis_recovered_changes_total", "Changes Redis lost that a replica "
            "wrote again", ["structure"], registry=r)
        self.banlist_bootstraps = Counter(
            "rearrange_banlist_bootstraps_total", "A replica's first copy from the bootstrap "
            "snapshot (REARRANGE_BANLIST_BOOTSTRAP_URL): loaded, or failed (it loads Redis's "
            "copy instead)", ["structure", "result"], registry=r)
        self.banlist_bootstrap_seconds = Gauge(
            "rearrange_banlist_bootstrap_seconds", "How long the last bootstrap snapshot took to "
            "fetch, check and load", ["structure"], registry=r, multiprocess_mode="livemax")
        self.embedded_starts = Counter(
            "rearrange_banlist_embedded_starts_total", "Starts of an embedded store: from its "
            "snapshot and the log after it, or from the whole log, there being no snapshot "
            "(replay) or one its log did not continue (refused; logged with why)",
            ["structure", "result"], registry=r)
        for structure in ("banlist", "quarantine"):  # the lists (sanction states: no store)
            for result in EMBEDDED_STARTS:
                self.embedded_starts.labels(structure, result)
        for structure in STRUCTURES:
            for result in BOOTSTRAP_RESULTS:
                self.banlist_bootstraps.labels(structure, result)
            for result in RECOVERY_RESULTS:
                self.redis_recoveries.labels(structure, result)
            for cause in REFUSAL_CAUSES:
                self.redis_refusals.labels(structure, cause)
            for result in DURABILITY_RESULTS:
                self.redis_writes.labels(structure, result)
        for result in POLICY_RESULTS:
            self.redis_policy_checks.labels(result)

    def _init_feedback(self) -> None:
        r = self._own
        self.interleaving_impressions = Counter(
            "rearrange_interleaving_impressions_total", "Interleaved pages this replica served "
            "and kept for their feedback", ["experiment"], registry=r)
        self.interleaving_outcomes = Counter(
            "rearrange_interleaving_outcomes_total", "Feedback outcomes this replica credited: "
            "control or treatment (its team got more clicks), tie; a feedback replacing an "
            "earlier one for the same page counts again (the results route counts the last "
            "one only)", ["experiment", "outcome"], registry=r)

    def track_caches(self, kind: str, caches: Callable[[], Iterable[CacheStats]]) -> None:
        """Export the near_duplicates caches of `kind` that `caches()` lists at each scrape.

        `kind` is "signature" or "shingle" (`CACHE_KINDS`). `caches` yields the engine's
        `cache_stats()` rows (profile, kind, hits, misses, evictions, entries, bytes) of the
        config in use; read at scrape time, so the request path does no metrics work for
        the caches and a reload (new rules, new caches, counters from zero, as after a
        restart) needs no re-registration. With several workers each worker writes its
        caches' counts to its files at every refresh instead (`CacheFiles`), and a scrape
        sums them all.
        """
        if self.multiprocess_dir is not None:  # several workers: through their files
            files = self._cache_files.get(kind)
            if files is None:
                files = self._cache_files[kind] = CacheFiles(kind, caches, self._own)
            files.caches = caches
            return
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

    # ---- the impression store's events (app/experiments/feedback.py: FeedbackEvents) ----------
    def impressions_recorded(self, experiment: str, count: int) -> None:
        self.interleaving_impressions.labels(experiment).inc(count)

    def outcome_recorded(self, experiment: str, outcome: str) -> None:
        self.interleaving_outcomes.labels(experiment, outcome).inc()

    def impressions_dropped(self, reason: str, count: int) -> None:
        self.impressions_lost.labels(reason).inc(count)

    # ---- the stores' events (app/banlist/events.py: StoreEvents), as series ----------------
    def redis_error(self, op: str) -> None:
        self.banlist_redis_errors.labels(op).inc()

    def refused(self, structure: str, cause: str) -> None:
        self.redis_refusals.labels(structure, cause).inc()
        if structure != "sanctions":  # a banlist's replica (the banlist or quarantine list)
            self.banlist_backward_refused.inc()

    def resynced(self, cause: str) -> None:
        self.banlist_resyncs.labels(cause).inc()

    def applied(self, lag_seconds: float) -> None:
        self.banlist_lag.observe(lag_seconds)

    def bootstrapped(self, structure: str, result: str, seconds: float) -> None:
        self.banlist_bootstraps.labels(structure, result).inc()
        if result == "loaded":
            self.banlist_bootstrap_seconds.labels(structure).set(seconds)

    def embedded_start(self, structure: str, result: str) -> None:
        self.embedded_starts.labels(structure, result).inc()

    def recovered(self, structure: str, result: str, changes: int) -> None:
        self.redis_recoveries.labels(structure, result).inc()
        self.redis_recovered_changes.labels(structure).inc(changes)

    def durability(self, structure: str, result: str, seconds: float) -> None:
        self.redis_writes.labels(structure, result).inc()
        if result != "alone":
            self.redis_wait.labels(structure).observe(seconds)

    def policy_checked(self, result: str) -> None:
        self.redis_policy_checks.labels(result).inc()
        self.redis_evicting.set(1 if result == "evicting" else 0)

    # ---- the sanctions' events (app/sanctions/events.py: SanctionEvents) ------------------
    def sanction_moved(self, from_state: str, to_state: str) -> None:
        self.sanction_transitions.labels(from_state, to_state).inc()

    def sanction_stale(self) -> None:
        self.sanction_stale_observations.inc()

    def sanction_suppressed(self, would_be: str) -> None:
        self.sanction_suppressed_observations.labels(would_be).inc()

    # ---- the Python rule executor's events (app/engine/executor.py: RuleEvents) ----------
    def rule_event(self, rule: str, event: str) -> None:
        self.python_rule_events.labels(rule, event).inc()

    def rule_processes(self, state: Mapping[str, Any]) -> None:
        """Set the executor's gauges from its `state()`."""
        busy = state["busy"]
        for name, n in (("idle", state["processes"] - busy), ("busy", busy),
                        ("starting", state["starting"])):
            self.python_rule_processes.labels(name).set(n)

    # ---- the config's events (app/config/events.py: ConfigEvents), as series --------------
    def config_loaded(self, result: str) -> None:
        self.config_reloads.labels(result).inc()

    def config_served(self, loaded_at: float) -> None:
        self.config_info.set(loaded_at)

    def config_version_of(self, version: Callable[[], str]) -> None:
        self.config_version.version = version

    def config_redis_error(self, op: str) -> None:
        self.config_redis_errors.labels(op).inc()

    def http_response(self, route: str, status: int) -> None:
        """Count one HTTP response by route template and status code."""
        child = self._http.get((route, status))
        if child is None:
            child = self.http_response_series(route, status)
        child.inc()

    def http_response_series(self, route: str, code: int) -> Any:
        """The counter child of (route, status), remembered for the next response."""
        child = self._http[(route, code)] = self.http_responses.labels(route, str(code))
        return child

    def refresh(self, readings: Callable[[Metrics], None]) -> None:
        """Set this worker's gauges: `readings(self)` (the service's state), then the config
        info. At each scrape, and with several workers at each housekeeping poll too, so
        the gauges of a worker that is not scraped stay fresh in its files."""
        readings(self)
        self.config_version.refresh()
        self.banlist_digest.refresh()
        for files in self._cache_files.values():
            files.sync()
        if self._worker_cpu is not None:
            self._worker_cpu.set(own_cpu_seconds())


@functools.cache
def _commit() -> str:
    return build_commit()  # one `git` call per process, not per Metrics
