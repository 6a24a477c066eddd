"""Every Prometheus metric, on an explicit registry; label values come only from config."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.pipeline import Outcome

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
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
        self.audit_dropped = Counter("rearrange_audit_log_dropped_total",
                                     "Audit log lines dropped because the writer fell behind",
                                     registry=r)
        self._actions: dict[tuple[str, str, str, str], Counter] = {}
        self._rule_time: dict[tuple[str, str], Histogram] = {}
        self._latency: dict[str, Histogram] = {}

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
