"""The per-request series the Rust engine keeps (app._engine.EngineMetrics), exported as
standard families at scrape time: one worker's, or every worker's summed (the engine's
slab files, crates/engine/src/metrics/slab.rs)."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import Counter, Gauge
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from app._engine import EngineMetrics

log = logging.getLogger(__name__)

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
        "given up midway (reason: deadline_stopped); rules that failed under on_error open "
        "or in shadow (reason: error)", ("rule", "phase", "reason")),
    "rearrange_rule_errors_total": ("Rule failures (raised, panicked or refused output)",
                                    ("rule", "phase")),
    "rearrange_experiment_exposures_total": (
        "Assignments by experiment, variant and whether they were triggered: a gated rule "
        "changed the page or would have in shadow, an interleaving's arms differed "
        "(QA-forced ones excluded)", ("experiment", "variant", "triggered")),
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
    """The engine's per-request series, exported from one `snapshot()` per scrape.

    With several workers the snapshot is every worker's slab file summed; a file that
    cannot be read is left out of the sums, counted in `rearrange_metrics_unreadable_files`
    and logged once. Updates the engine could not record (its slab could not grow) are
    `rearrange_metrics_lost_updates_total`.
    """

    def __init__(self, engine_metrics: EngineMetrics) -> None:
        self.engine_metrics = engine_metrics
        self._logged: set[tuple[str, str]] = set()

    def describe(self) -> Iterator[Metric]:
        for name, (doc, labels) in ENGINE_COUNTERS.items():
            yield CounterMetricFamily(name, doc, labels=list(labels))
        for name, (doc, labels) in ENGINE_HISTOGRAMS.items():
            yield HistogramMetricFamily(name, doc, labels=list(labels))
        yield from self._health([], (0, None))

    def collect(self) -> Iterator[Metric]:
        snap = self.engine_metrics.snapshot()
        for name, (doc, labels) in ENGINE_COUNTERS.items():
            counter = CounterMetricFamily(name, doc, labels=list(labels))
            for key, value in snap["counters"].get(name, ()):
                counter.add_metric(list(key), value)
            yield counter
        for name, (doc, labels) in ENGINE_HISTOGRAMS.items():
            family = HistogramMetricFamily(name, doc, labels=list(labels))
            bounds = snap["bounds"].get(name) or ()
            for key, counts, total in snap["histograms"].get(name, ()):
                cumulative, buckets = 0, []
                for bound, count in zip((*bounds, float("inf")), counts, strict=True):
                    cumulative += count
                    buckets.append(("+Inf" if bound == float("inf") else repr(bound),
                                    cumulative))
                family.add_metric(list(key), buckets, total)
            yield family
        yield from self._health(snap["unreadable"], snap["lost"])

    def _health(self, unreadable: list[tuple[str, str]],
                lost_updates: tuple[int, str | None]) -> Iterator[Metric]:
        for path, problem in unreadable:
            if (path, problem) not in self._logged:
                self._logged.add((path, problem))
                log.error("metrics: %s left out of the sums: %s", path, problem)
        lost, why = lost_updates
        if lost and ("lost", str(why)) not in self._logged:
            self._logged.add(("lost", str(why)))
            log.error("metrics: the engine could not record a new series: %s", why)
        yield GaugeMetricFamily(
            "rearrange_metrics_unreadable_files",
            "Workers' metrics files the last scrape could not read (left out of the sums)",
            value=len(unreadable))
        yield CounterMetricFamily(
            "rearrange_metrics_lost_updates",
            "Engine metric updates not recorded: this worker's slab could not grow",
            value=lost)


class EngineRequests:
    """`requests.labels(profile, outcome).inc()` for the outcomes decided in Python."""

    def __init__(self, engine_metrics: EngineMetrics) -> None:
        self.engine_metrics = engine_metrics

    def labels(self, profile: str, outcome: str) -> _Outcome:
        return _Outcome(self.engine_metrics, profile, outcome)


class _Outcome:
    """One (profile, outcome) series of `EngineRequests`."""

    __slots__ = ("engine_metrics", "outcome", "profile")

    def __init__(self, engine_metrics: EngineMetrics, profile: str, outcome: str) -> None:
        self.engine_metrics, self.profile, self.outcome = engine_metrics, profile, outcome

    def inc(self) -> None:
        self.engine_metrics.count_request(self.profile, self.outcome)


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
        totals = _per_profile(self.kind, self.caches())
        held, missed = CACHE_KINDS[self.kind]
        name = f"rearrange_{self.kind}_cache"
        families: list[CounterMetricFamily | GaugeMetricFamily] = [
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


def _per_profile(kind: str, rows: Iterable[CacheStats]) -> dict[str, list[int]]:
    """(hits, misses, evictions, entries, bytes) per profile, its caches of `kind` summed."""
    totals: dict[str, list[int]] = {}
    for profile, row_kind, *values in rows:
        if row_kind == kind:
            t = totals.setdefault(profile, [0, 0, 0, 0, 0])
            for n, value in enumerate(values):
                t[n] += value
    return totals


class CacheFiles:
    """The caches of one kind with several workers: each worker writes its own to its
    prometheus_client files at every refresh (a scrape it answers, and each housekeeping
    poll), so a scrape, whichever worker answers it, sums every worker's. Counters grow by
    what the engine counted since the last refresh; entries and bytes are `livesum`
    gauges (a worker that died leaves them, its counts stay).

    A reload builds new caches that count from zero: a count lower than the last one read
    is taken as that fresh start, so the exported counters never go down.
    """

    def __init__(self, kind: str, caches: Callable[[], Iterable[CacheStats]],
                 registry: CollectorRegistry) -> None:
        self.kind = kind
        self.caches = caches
        held, missed = CACHE_KINDS[kind]
        name = f"rearrange_{kind}_cache"
        self.counters = [
            Counter(f"{name}_hits", f"{held} found in the cache", ["profile"],
                    registry=registry),
            Counter(f"{name}_misses", f"{held} {missed}", ["profile"], registry=registry),
            Counter(f"{name}_evictions", f"{held} dropped to stay under the cache's size",
                    ["profile"], registry=registry),
        ]
        self.gauges = [
            Gauge(f"{name}_entries", f"{held} held", ["profile"], registry=registry,
                  multiprocess_mode="livesum"),
            Gauge(f"{name}_bytes", f"Approximate bytes held by the {kind} cache",
                  ["profile"], registry=registry, multiprocess_mode="livesum"),
        ]
        self._last: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def sync(self) -> None:
        """Write what the engine's caches counted since the last sync to this worker's files."""
        with self._lock:
            now = _per_profile(self.kind, self.caches())
            for profile in now.keys() | self._last.keys():
                values = now.get(profile, [0, 0, 0, 0, 0])
                before = self._last.get(profile, [0, 0, 0, 0, 0])
                for counter, value, last in zip(self.counters, values, before, strict=False):
                    grown = value - last if value >= last else value
                    if grown:
                        counter.labels(profile).inc(grown)
                for gauge, value in zip(self.gauges, values[3:], strict=True):
                    gauge.labels(profile).set(value)
            self._last = now
