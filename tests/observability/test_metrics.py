"""The engine's per-request series through Metrics' collector: sums, buckets, label sets."""
from __future__ import annotations

import json

from prometheus_client import generate_latest

from app._engine import Engine
from app.config.load import load_bytes
from app.config.spec import compile_spec
from app.observability.metrics import RULE_BUCKETS, Metrics
from tests.api.test_experiments_api import samples, value

CONFIG = b"""
profiles:
  default:
    pre-filter: [spam_ban]
    rerank: [{spam_demotion: {theta_low: 0.3, theta_high: 0.8, lambda: 5}}]
    trim: [{depth: {k: 2}}]
  commercial:
    extends: default
"""


def serve(metrics: Metrics, profile: str, spam: list[float]) -> None:
    engine = Engine(*compile_spec(load_bytes(CONFIG)), metrics.engine_metrics)
    docs = [{"id": f"d{i}", "url": f"http://h{i}.example/", "score": 10.0 - i, "spam_score": s}
            for i, s in enumerate(spam)]
    status, _, _, _, _ = engine.rerank(json.dumps({"profile": profile, "documents": docs}).encode())
    assert status == 200


def test_action_counts_and_score_changes_add_up_per_profile():
    m = Metrics()
    serve(m, "default", [0.99, 1.0, 0.0, 0.0])  # d0 banned (> 0.95); d1 too
    serve(m, "default", [0.55, 0.0, 0.0])       # d0: penalty 0.5, -2.5; then trimmed below
    serve(m, "commercial", [0.0, 0.8, 0.0])     # d1: penalty 1, -5
    s = samples(generate_latest(m.registry).decode())
    actions = "rearrange_rule_actions_total"
    ban = {"rule": "spam_ban", "phase": "pre-filter", "action": "remove", "mode": "applied"}
    assert value(s, actions, profile="default", **ban) == 2
    assert value(s, actions, profile="commercial", **ban) is None
    rescore = {"rule": "spam_demotion", "phase": "rerank", "action": "rescore",
               "mode": "applied"}
    assert value(s, actions, profile="default", **rescore) == 1
    assert value(s, actions, profile="commercial", **rescore) == 1
    scored = "rearrange_rule_score_change"
    assert value(s, scored + "_sum", rule="spam_demotion", mode="applied",
                 direction="down") == 7.5
    assert value(s, scored + "_count", rule="spam_demotion", mode="applied",
                 direction="down") == 2
    assert value(s, "rearrange_requests_total", profile="default", outcome="ok") == 2


def test_rule_durations_are_cumulative_buckets_counting_every_call():
    m = Metrics()
    for _ in range(3):
        serve(m, "default", [0.0, 0.5, 0.0])
    s = samples(generate_latest(m.registry).decode())
    took = "rearrange_rule_duration_seconds"
    depth = {"rule": "depth", "phase": "trim", "mode": "applied"}
    counts = [value(s, took + "_bucket", le=repr(float(b)), **depth) for b in RULE_BUCKETS]
    assert counts == sorted(counts)  # cumulative, as Prometheus' `le` wants
    assert value(s, took + "_bucket", le="+Inf", **depth) == value(s, took + "_count", **depth)
    assert value(s, took + "_count", **depth) == 3
    assert value(s, took + "_sum", **depth) > 0  # the time it took, read off the clock
