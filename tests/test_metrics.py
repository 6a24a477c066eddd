"""Metrics.observe against the exposition: bucket placement, sums and label sets."""
from __future__ import annotations

from prometheus_client import generate_latest

from app.metrics import Metrics
from app.pipeline import APPLIED, SHADOW, AuditRecord, Outcome, Phase, RuleTiming
from tests.api.test_experiments_api import samples, value


def outcome(timings: list[RuleTiming], actions: dict) -> Outcome:
    return Outcome(docs=[], audit=[], fallback=None, timings=timings, actions=actions)


def rescore(delta: float) -> AuditRecord:
    return AuditRecord("spam_demotion", Phase.RERANK, "d", "rescore", "r", delta, APPLIED)


def test_rule_histograms_place_each_value_in_its_le_bucket():
    m = Metrics()
    m.observe("default", outcome([
        RuleTiming("depth", Phase.TRIM, APPLIED, 0.00005, (), (), 3),  # on a bound: le=5e-05
        RuleTiming("depth", Phase.TRIM, APPLIED, 0.002, (), (-2, 4), 10),
        RuleTiming("spam_demotion", Phase.RERANK, SHADOW, 0.0, [rescore(-5.0), rescore(0.3)]),
    ], {}), 0.001)
    m.observe("default", outcome([RuleTiming("depth", Phase.TRIM, APPLIED, 1.0, (), (), 0)], {}),
              0.001)
    s = samples(generate_latest(m.registry).decode())
    took = "rearrange_rule_duration_seconds"
    depth = {"rule": "depth", "phase": "trim", "mode": "applied"}
    assert value(s, took + "_count", **depth) == 3
    assert value(s, took + "_bucket", le="1e-05", **depth) == 0
    assert value(s, took + "_bucket", le="5e-05", **depth) == 1
    assert value(s, took + "_bucket", le="0.005", **depth) == 2
    assert value(s, took + "_bucket", le="0.05", **depth) == 2
    assert value(s, took + "_bucket", le="+Inf", **depth) == 3
    assert value(s, took + "_sum", **depth) == 0.00005 + 0.002 + 1.0
    churn = "rearrange_rule_top10_churn"
    assert value(s, churn + "_bucket", rule="depth", mode="applied", le="0.0") == 1
    assert value(s, churn + "_bucket", rule="depth", mode="applied", le="2.0") == 1
    assert value(s, churn + "_bucket", rule="depth", mode="applied", le="3.0") == 2
    assert value(s, churn + "_bucket", rule="depth", mode="applied", le="9.0") == 2
    assert value(s, churn + "_bucket", rule="depth", mode="applied", le="10.0") == 3
    assert value(s, churn + "_sum", rule="depth", mode="applied") == 13
    moved = "rearrange_rule_position_change"
    assert value(s, moved + "_sum", rule="depth", mode="applied", direction="up") == 2
    assert value(s, moved + "_sum", rule="depth", mode="applied", direction="down") == 4
    assert value(s, moved + "_bucket", rule="depth", mode="applied", direction="down",
                 le="3.0") == 0
    scored = "rearrange_rule_score_change"
    assert value(s, scored + "_sum", rule="spam_demotion", mode="shadow", direction="down") == 5
    assert value(s, scored + "_sum", rule="spam_demotion", mode="shadow", direction="up") == 0.3
    assert value(s, took + "_count", rule="spam_demotion", phase="rerank", mode="shadow") == 1


def test_action_counts_add_up_per_profile():
    m = Metrics()
    key = ("banlist", Phase.PRE_FILTER, "remove", APPLIED)
    other = ("depth", Phase.TRIM, "trim", APPLIED)
    m.observe("default", outcome([], {key: 2, other: 5}), 0.001)
    m.observe("default", outcome([], {key: 1}), 0.001)
    m.observe("commercial", outcome([], {key: 4}), 0.001)
    s = samples(generate_latest(m.registry).decode())
    actions = "rearrange_rule_actions_total"
    banlist = {"rule": "banlist", "phase": "pre-filter", "action": "remove", "mode": "applied"}
    assert value(s, actions, profile="default", **banlist) == 3
    assert value(s, actions, profile="commercial", **banlist) == 4
    assert value(s, actions, profile="default", rule="depth", phase="trim", action="trim",
                 mode="applied") == 5
    assert value(s, actions, profile="commercial", rule="depth", phase="trim", action="trim",
                 mode="applied") is None
    assert value(s, "rearrange_requests_total", profile="default", outcome="ok") == 2
