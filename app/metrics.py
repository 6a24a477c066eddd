"""Every Prometheus metric, on an explicit registry; label values come only from config.

A request touches many series (one per rule call), so the request path is kept cheap:
label children are cached in dicts, the runner counts audit records per rule call
(Outcome.actions) and the request adds those counts to a plain dict under one lock
(`_Counts`), and the per-rule histograms are a small collector of plain integer lists
(`_Histograms`); both export standard Prometheus families at scrape time.
"""
from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from app.effects import TOP
from app.pipeline import RERANK, Outcome, Phase
from app.srm import srm

RELOAD_RESULTS = ("changed", "unchanged", "refused")  # rearrange_config_reloads_total
# rearrange_banlist_resyncs_total: the replica's causes and the operator's (seed, adopt)
RESYNC_CAUSES = ("start", "gap", "epoch", "reseed", "seed", "adopt")
HOUSEKEEPING_TASKS = ("config", "sweep")  # rearrange_housekeeping_errors_total
RERANK_ROUTE = "/v1/rerank"
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RULE_BUCKETS = (0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05)
# Magnitudes, with the sign in a `direction` label (up/down), so _sum stays a counter.
POSITION_BUCKETS = (1, 2, 3, 5, 10, 20, 50)
SCORE_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 50)
CHURN_BUCKETS = tuple(range(TOP + 1))  # a call's churn n is counted at index n


class _Histograms:
    """Histograms kept as plain lists, one per label set: [count per bound..., +Inf, sum].

    The families of one Metrics share a lock, so a request's observations of all of them
    cost one acquire; `series` hands out the list itself for the caller to update under it.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str],
                 buckets: Sequence[float], lock: threading.Lock | None = None) -> None:
        self.name, self.documentation, self.labels = name, documentation, list(labels)
        self.bounds = tuple(float(b) for b in buckets)
        self._series: dict[tuple[str, ...], list[Any]] = {}
        self.lock = lock or threading.Lock()

    def series(self, key: tuple[str, ...]) -> list[Any]:
        """The list of one label set, created empty on first use; call it under `lock`."""
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0] * (len(self.bounds) + 1) + [0.0]
        return series

    def observe(self, series: list[Any], values: Iterable[float]) -> None:
        """Add values to a list from `series`; the caller holds `lock`."""
        bounds, total = self.bounds, len(self.bounds) + 1
        for v in values:
            series[bisect_left(bounds, v)] += 1  # first bound >= v: Prometheus's `le`
            series[total] += v

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labels)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        with self.lock:
            snapshot = [(k, list(v)) for k, v in self._series.items()]
        for key, series in snapshot:
            cumulative, buckets = 0, []
            for bound, count in zip((*self.bounds, float("inf")), series, strict=False):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            family.add_metric(list(key), buckets, series[-1])
        yield family


class _Counts:
    """A counter family kept as a dict of integers; `add_batch` takes a request's counts at
    once under one lock, where prometheus_client's children take a lock per `inc`."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, list(labels)
        # suffix → key → count: a request adds its keys as they come, with no tuple built
        self._counts: dict[tuple[str, ...], dict[tuple[str, ...], int]] = {}
        self._lock = threading.Lock()

    def add_batch(self, counts: Mapping[tuple[str, ...], int], *suffix: str) -> None:
        """Add each count under its key followed by the `suffix` labels."""
        with self._lock:
            totals = self._counts.get(suffix)
            if totals is None:
                totals = self._counts[suffix] = {}
            for key, n in counts.items():
                totals[key] = totals.get(key, 0) + n

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self.name, self.documentation, labels=self.labels)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        with self._lock:
            snapshot = [((*key, *suffix), n) for suffix, totals in self._counts.items()
                        for key, n in totals.items()]
        for key, n in snapshot:
            family.add_metric(list(key), n)
        yield family


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

    With `engine_metrics` (app._engine.EngineMetrics) the per-request series live in the
    Rust engine and EngineCollector exports them; without it the Python pipeline's series
    below are kept (the path service.py runs until it is wired to the Engine).
    """

    def __init__(self, registry: CollectorRegistry | None = None,
                 engine_metrics: Any = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.engine_metrics = engine_metrics
        if engine_metrics is not None:
            self._init_engine(engine_metrics)
        else:
            self._init_python()
        self._init_common()

    def _init_engine(self, engine_metrics: Any) -> None:
        self.registry.register(EngineCollector(engine_metrics))  # type: ignore[arg-type]
        self.requests = _EngineRequests(engine_metrics)
        self.srm = _Srm(self)
        self.registry.register(self.srm)  # type: ignore[arg-type]

    def _init_python(self) -> None:
        r = self.registry
        self.requests = Counter("rearrange_requests_total", "Rerank requests by outcome",
                                ["profile", "outcome"], registry=r)
        self.request_seconds = Histogram(
            "rearrange_request_duration_seconds", "Rerank handling time (decode to encode)",
            ["profile"], buckets=LATENCY_BUCKETS, registry=r)
        self.rule_actions = _Counts(
            "rearrange_rule_actions", "Audit records by rule, phase, action, mode and profile",
            ["rule", "phase", "action", "mode", "profile"])
        # The per-rule histograms share one lock: a request takes it once for all of them.
        self._rule_lock = lock = threading.Lock()
        self.rule_seconds = _Histograms(
            "rearrange_rule_duration_seconds", "Time per rule call, applied or shadow",
            ["rule", "phase", "mode"], RULE_BUCKETS, lock)
        self.position_change = _Histograms(
            "rearrange_rule_position_change",
            "Positions moved by each document in the top 10 after a rule that moved it "
            "(shadow: would have moved)", ["rule", "mode", "direction"], POSITION_BUCKETS, lock)
        self.score_change = _Histograms(
            "rearrange_rule_score_change", "Size of each rescore by a rule (shadow: would be)",
            ["rule", "mode", "direction"], SCORE_BUCKETS, lock)
        self.top_churn = _Histograms(
            "rearrange_rule_top10_churn",
            "Documents a rule brought into the top 10 (would have, in shadow), per rule call",
            ["rule", "mode"], CHURN_BUCKETS, lock)
        # (rule, phase, mode) → its duration and churn series, found with one dict probe
        self._per_call: dict[tuple[str, Phase, str], tuple[list[Any], list[Any]]] = {}
        for collector in (self.rule_actions, self.rule_seconds, self.position_change,
                          self.score_change, self.top_churn):
            r.register(collector)  # type: ignore[arg-type]
        self.fallbacks = Counter("rearrange_fallbacks_total", "Pages emptied by filters",
                                 ["rule", "action"], registry=r)
        self.experiment_assignments = Counter(
            "rearrange_experiment_assignments_total",
            "Requests by experiment and variant (QA-forced ones excluded)",
            ["experiment", "variant"], registry=r)
        self.srm = _Srm(self)
        r.register(self.srm)  # type: ignore[arg-type]
        self.rule_skipped = Counter(
            "rearrange_rule_skipped_total",
            "Rules skipped on a request: optional ones by the deadline, not started (reason: "
            "deadline) or given up midway (reason: deadline (stopped while running)); failed "
            "ones with on_error: open or in shadow (reason: error)",
            ["rule", "phase", "reason"], registry=r)
        self.rule_errors = Counter(
            "rearrange_rule_errors_total",
            "Rule failures (raised, or a Python rule's output refused), whatever the policy",
            ["rule", "phase"], registry=r)
        self._latency: dict[str, Any] = {}
        self._ok: dict[str, Any] = {}
        self._assigned: dict[tuple[str, str], Any] = {}

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
        self.banlist_lookups = Counter("rearrange_banlist_lookups_total",
                                       "Banlist lookups (API) by outcome", ["outcome"],
                                       registry=r)
        self.config_reloads = Counter("rearrange_config_reloads_total",
                                      "Config reload attempts", ["result"], registry=r)
        self.config_info = Gauge("rearrange_config_loaded_timestamp_seconds",
                                 "When the config in use was loaded", registry=r)
        self.housekeeping_errors = Counter(
            "rearrange_housekeeping_errors_total",
            "Unexpected errors of the background tasks (config poll, TTL sweep), by task",
            ["task"], registry=r)
        # Series that alerts take increase() of exist at 0 from the start: a series born at 1
        # has no earlier sample, so its first event (a refused reload) would never alert.
        for counter, values in ((self.config_reloads, RELOAD_RESULTS),
                                (self.banlist_resyncs, RESYNC_CAUSES),
                                (self.housekeeping_errors, HOUSEKEEPING_TASKS)):
            for value in values:
                counter.labels(value)
        self.audit_dropped = Counter(
            "rearrange_audit_log_dropped_total",
            "Audit log lines dropped: writer behind, write failed, or still queued at close",
            registry=r)
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

    def track_caches(self, kind: str, caches: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        """Export the near_duplicates caches of `kind` that `caches()` lists at each scrape.

        `kind` is "signature" or "shingle" (`CACHE_KINDS`). `caches` yields (profile,
        cache) pairs from the config in use; read at scrape time, so the request path does
        no metrics work for the caches and a reload (new rules, new caches, counters from
        zero, as after a restart) needs no re-registration.
        """
        collector = self._caches.get(kind)
        if collector is None:
            collector = self._caches[kind] = CacheCollector(kind, caches)
            self.registry.register(collector)
        else:
            collector.caches = caches

    def observe(self, profile: str, outcome: Outcome, seconds: float) -> None:
        """Record one served request: per-rule actions, times and deltas, fallback, latency.

        The runner has already counted the audit records per rule call; each rule call then
        costs one dict probe for its two series and a few list updates, under one lock for
        the whole request (~12 us for 13 rule calls). The duration and churn updates are
        `_Histograms.observe` written out for one value, since they run for every call.
        """
        self.rule_actions.add_batch(outcome.actions, profile)
        per_call = self._per_call
        seconds_bounds = self.rule_seconds.bounds
        seconds_sum, churn_sum = len(seconds_bounds) + 1, TOP + 2
        with self._rule_lock:
            for t in outcome.timings:
                key = (t.rule, t.phase, t.mode)
                pair = per_call.get(key)
                if pair is None:
                    pair = per_call[key] = (self.rule_seconds.series(key),
                                            self.top_churn.series((t.rule, t.mode)))
                took, churn = pair
                took[bisect_left(seconds_bounds, t.seconds)] += 1
                took[seconds_sum] += t.seconds
                n = t.churn  # 0 to TOP, and the bounds are 0, 1, ..., TOP: n is its index
                churn[n if n <= TOP else TOP + 1] += 1
                if n:
                    churn[churn_sum] += n
                if t.moves:
                    _split(self.position_change, t.rule, t.mode, t.moves, "down", "up")
                if t.records and t.phase is RERANK:  # only rerank rules rescore
                    deltas = [r.delta for r in t.records if r.action == "rescore" and r.delta]
                    if deltas:
                        _split(self.score_change, t.rule, t.mode, deltas, "up", "down")
        if outcome.fallback is not None:
            self.fallbacks.labels(outcome.fallback["rule"], outcome.fallback["action"]).inc()
        for skip in outcome.skipped:
            self.rule_skipped.labels(skip["rule"], skip["phase"], skip["reason"]).inc()
        latency = self._latency.get(profile)
        if latency is None:
            latency = self._latency[profile] = self.request_seconds.labels(profile)
            self._ok[profile] = self.requests.labels(profile, "ok")
        latency.observe(seconds)
        self._ok[profile].inc()

    def rule_failed(self, profile: str, errors: Sequence[Any], closed: bool) -> None:
        """Count a request's rule failures; `closed`: one of them answered it 503."""
        for error in errors:
            self.rule_errors.labels(error.rule, error.phase).inc()
        if closed:
            self.requests.labels(profile, "rule_failed").inc()

    def assigned(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Count one request's (experiment, variant) assignments."""
        for pair in pairs:
            child = self._assigned.get(pair)
            if child is None:
                child = self._assigned[pair] = self.experiment_assignments.labels(*pair)
            child.inc()

    def assignment_counts(self) -> dict[tuple[str, str], float]:
        """(experiment, variant) → requests assigned since start, read from the counter."""
        if self.engine_metrics is not None:
            counts = self.engine_metrics.snapshot()["counters"]
            return {tuple(k): v for k, v in
                    counts.get("rearrange_experiment_assignments_total", ())}
        out = {}
        for family in self.experiment_assignments.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[(sample.labels["experiment"], sample.labels["variant"])] = sample.value
        return out

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


def _split(histograms: _Histograms, rule: str, mode: str, values: Sequence[float],
           positive: str, negative: str) -> None:
    """Magnitudes under direction labels (a position +n is down, a score +x is up); the
    caller holds the histograms' lock."""
    pos = [v for v in values if v > 0]
    neg = [-v for v in values if v < 0]
    if pos:
        histograms.observe(histograms.series((rule, mode, positive)), pos)
    if neg:
        histograms.observe(histograms.series((rule, mode, negative)), neg)


# kind → (what the cache holds, how a miss is computed), for the families' help texts
CACHE_KINDS = {
    "signature": ("near_duplicates signatures", "computed from text"),
    "shingle": ("near_duplicates exact shingle sets", "shingled from text"),
}


class CacheCollector(Collector):
    """Hits, misses, evictions, entries and bytes of each profile's caches of one kind:
    `rearrange_<kind>_cache_*`."""

    def __init__(self, kind: str, caches: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        self.kind = kind
        self.caches = caches

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """One sample per profile (caches of one profile summed)."""
        totals: dict[str, list[int]] = {}
        for profile, cache in self.caches():
            t = totals.setdefault(profile, [0, 0, 0, 0, 0])
            for n, value in enumerate((cache.hits, cache.misses, cache.evictions,
                                       len(cache), cache.bytes)):
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
