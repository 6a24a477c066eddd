"""Every Prometheus metric, on an explicit registry; label values come only from config."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.pipeline import Outcome

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
RULE_BUCKETS = (0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05)


class Metrics:
    """The service's metrics; label children are cached so a request does few lookups."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter("rearrange_requests_total", "Rerank requests by outcome",
                                ["profile", "outcome"], registry=r)
        self.request_seconds = Histogram(
            "rearrange_request_duration_seconds", "Rerank handling time (decode to encode)",
            ["profile"], buckets=LATENCY_BUCKETS, registry=r)
        self.rule_actions = Counter(
            "rearrange_rule_actions_total", "Audit records by rule, phase, action and mode",
            ["rule", "phase", "action", "mode"], registry=r)
        self.rule_seconds = Histogram(
            "rearrange_rule_duration_seconds", "Time per rule call",
            ["rule", "phase"], buckets=RULE_BUCKETS, registry=r)
        self.fallbacks = Counter("rearrange_fallbacks_total", "Pages emptied by filters",
                                 ["rule", "action"], registry=r)
        self.experiment_assignments = Counter(
            "rearrange_experiment_assignments_total", "Requests by experiment and variant",
            ["experiment", "variant"], registry=r)
        self.banlist_entries = Gauge("rearrange_banlist_entries", "Banlist entries held",
                                     registry=r)
        self.banlist_version = Gauge("rearrange_banlist_version", "Banlist version served",
                                     registry=r)
        self.banlist_staleness = Gauge(
            "rearrange_banlist_staleness_seconds",
            "Seconds since the banlist was last known in sync (0 for the embedded store)",
            registry=r)
        self.config_reloads = Counter("rearrange_config_reloads_total",
                                      "Config reload attempts", ["result"], registry=r)
        self.config_info = Gauge("rearrange_config_loaded_timestamp_seconds",
                                 "When the config in use was loaded", registry=r)
        self.audit_dropped = Counter("rearrange_audit_log_dropped_total",
                                     "Audit log lines dropped because the writer fell behind",
                                     registry=r)
        self._signature_caches: SignatureCacheCollector | None = None
        self._actions: dict[tuple[str, str, str, str], Counter] = {}
        self._rule_time: dict[tuple[str, str], Histogram] = {}
        self._latency: dict[str, Histogram] = {}

    def track_signature_caches(self, caches: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        """Export the near_duplicates signature caches that `caches()` lists at each scrape.

        `caches` yields (profile, cache) pairs from the config in use; read at scrape time,
        so the request path does no metrics work for the cache and a reload (new rules,
        new caches, counters from zero, as after a restart) needs no re-registration.
        """
        if self._signature_caches is None:
            self._signature_caches = SignatureCacheCollector(caches)
            self.registry.register(self._signature_caches)
        else:
            self._signature_caches.caches = caches

    def observe(self, profile: str, outcome: Outcome, seconds: float) -> None:
        """Record one served request: per-rule actions and times, fallback, latency."""
        counts: dict[tuple[str, str, str, str], int] = {}
        for rec in outcome.audit:
            key = (rec.rule, rec.phase.value, rec.action, rec.mode)
            counts[key] = counts.get(key, 0) + 1
        for key, n in counts.items():
            child = self._actions.get(key)
            if child is None:
                child = self._actions[key] = self.rule_actions.labels(*key)
            child.inc(n)
        for t in outcome.timings:
            tkey = (t.rule, t.phase.value)
            hist = self._rule_time.get(tkey)
            if hist is None:
                hist = self._rule_time[tkey] = self.rule_seconds.labels(*tkey)
            hist.observe(t.seconds)
        if outcome.fallback is not None:
            self.fallbacks.labels(outcome.fallback["rule"], outcome.fallback["action"]).inc()
        latency = self._latency.get(profile)
        if latency is None:
            latency = self._latency[profile] = self.request_seconds.labels(profile)
        latency.observe(seconds)
        self.requests.labels(profile, "ok").inc()


class SignatureCacheCollector(Collector):
    """Hits, misses, evictions, entries and bytes of each profile's signature cache."""

    def __init__(self, caches: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        self.caches = caches

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """One sample per profile (caches of one profile summed)."""
        totals: dict[str, list[int]] = {}
        for profile, cache in self.caches():
            t = totals.setdefault(profile, [0, 0, 0, 0, 0])
            for n, value in enumerate((cache.hits, cache.misses, cache.evictions,
                                       len(cache), cache.bytes)):
                t[n] += value
        families = [
            CounterMetricFamily("rearrange_signature_cache_hits",
                                "near_duplicates signatures found in the cache",
                                labels=["profile"]),
            CounterMetricFamily("rearrange_signature_cache_misses",
                                "near_duplicates signatures computed from text",
                                labels=["profile"]),
            CounterMetricFamily("rearrange_signature_cache_evictions",
                                "Signatures dropped to stay under cache_mb", labels=["profile"]),
            GaugeMetricFamily("rearrange_signature_cache_entries", "Signatures held",
                              labels=["profile"]),
            GaugeMetricFamily("rearrange_signature_cache_bytes",
                              "Approximate bytes held by the signature cache",
                              labels=["profile"]),
        ]
        for profile, values in sorted(totals.items()):
            for family, value in zip(families, values, strict=True):
                family.add_metric([profile], value)
        yield from families
