"""The Grafana dashboard and the Prometheus alerts parse and name only metrics that exist."""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from app.metrics import CACHE_KINDS, Metrics

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
METRIC = re.compile(r"\brearrange_[a-z0-9_]+")


def exported_names() -> set[str]:
    """Every sample name the registry can export, from each family's type."""
    names = set()
    for family in Metrics().registry.collect():
        suffixes = {"counter": ("_total", "_created"), "gauge": ("",),
                    "histogram": ("_bucket", "_sum", "_count", "_created")}[family.type]
        names |= {family.name + s for s in suffixes}
    return names


def expressions(node) -> list[str]:
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in ("expr", "definition")
                 and isinstance(v, str)]
        if isinstance(node.get("query"), str):
            found.append(node["query"])
        return found + [e for v in node.values() for e in expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in expressions(v)]
    return []


def test_dashboard_parses_and_references_only_real_metrics():
    dash = json.loads((DEPLOY / "grafana" / "rearrange.json").read_text())
    assert dash["uid"] and dash["panels"] and dash["__inputs"][0]["pluginId"] == "prometheus"
    exprs = expressions(dash)
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used and used <= exported_names(), used - exported_names()
    # the panels the issue asks for
    for name in ("rearrange_rule_position_change_sum", "rearrange_rule_score_change_sum",
                 "rearrange_rule_top10_churn_sum", "rearrange_rule_duration_seconds_bucket",
                 "rearrange_experiment_assignments_total", "rearrange_rule_actions_total"):
        assert name in used
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in dash["templating"]["list"]} == {"profile", "rule", "experiment"}


def test_alerts_parse_and_reference_only_real_metrics():
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    names = {r["alert"] for r in rules}
    assert {"RearrangeSampleRatioMismatch", "RearrangeBanlistStale", "RearrangeFallbackRateHigh",
            "RearrangeServerErrors"} <= names
    assert {"RearrangeReplicaDown", "RearrangeAllReplicasDown", "RearrangeLatencyHigh"} <= names
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}
        assert rule["expr"].count("(") == rule["expr"].count(")")
        used = set(METRIC.findall(rule["expr"]))
        if 'up{job="rearrange"}' in rule["expr"]:  # the scrape itself: no metric of ours
            continue
        assert used and used <= exported_names(), (rule["alert"], used - exported_names())


SELECTOR = re.compile(r"(rearrange_[a-z0-9_]+)\{([^}]*)\}")


def test_alert_selectors_match_series_that_exist_before_the_first_event():
    """increase() and rate() need a sample before the first event: a series born at 1 (the
    first refused reload, the first 5xx) would never alert. Every label value an alert
    selects with `=` is exported at 0 by a fresh registry."""
    samples = [s for family in Metrics().registry.collect() for s in family.samples]
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    checked = 0
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        for name, matchers in SELECTOR.findall(rule["expr"]):
            for label, value in re.findall(r'(\w+)="([^"]*)"', matchers):
                checked += 1
                assert any(s.name == name and s.labels.get(label) == value for s in samples), (
                    rule["alert"], name, label, value)
    assert checked >= 3


def test_the_docs_document_every_metric():
    operations = (DEPLOY.parent / "docs" / "operations.md").read_text()
    metrics = Metrics()
    for kind in CACHE_KINDS:  # registered by build_service; their families exist empty too
        metrics.track_caches(kind, list)
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{name}`" in operations, name
