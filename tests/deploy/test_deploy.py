"""The Grafana dashboard and the Prometheus alerts parse, pass their checks (JSON schema,
promtool) and name only metrics that exist; docs/metrics.md documents every one."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import yaml

from app.observability.engine import ENGINE_COUNTERS, ENGINE_HISTOGRAMS
from app.observability.metrics import CACHE_KINDS, Metrics
from tests.deploy import tools

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DATA = Path(__file__).resolve().parents[1] / "data"
METRIC = re.compile(r"\b(?:rearrange|process|python)_[a-z0-9_]+")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "info": ("_info",),
            "histogram": ("_bucket", "_sum", "_count")}


def exported_names() -> set[str]:
    """Every sample name the registry can export, from each family's type."""
    names = set()
    for family in Metrics().registry.collect():
        names |= {family.name + s for s in SUFFIXES[family.type]}
    return names


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tools.promtool(), *args], cwd=DEPLOY / "prometheus", capture_output=True,
                          text=True, timeout=120, check=False)


def test_promtool_checks_the_alert_rules():
    done = promtool("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_runs_the_alert_unit_tests():
    """deploy/prometheus/alerts_test.yml: each alert fires on the series the service
    exports, at the time it should, and a quiet service fires none."""
    done = promtool("test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (DEPLOY / "prometheus" /
                                                 "alerts_test.yml").read_text()))
    assert {"RearrangeHousekeepingErrors", "RearrangeAuditLogDropping", "RearrangeRedisErrors",
            "RearrangeRuleErrors", "RearrangeRulesSkipped", "RearrangeMemoryNearLimit",
            "RearrangeConfigReloadRefused", "RearrangeReplicaServesNoReranks",
            "RearrangePinnedHostScoresHigh", "RearrangePythonRulesNotStarting"} <= tested


def test_dashboard_matches_its_json_schema_and_panels_fit_the_grid():
    dash = json.loads((DEPLOY / "grafana" / "rearrange.json").read_text())
    schema = json.loads((DATA / "grafana_dashboard.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft202012Validator(schema).iter_errors(dash)]
    assert not errors, errors
    taken: set[tuple[int, int]] = set()
    for panel in dash["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                 for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_the_schema_refuses_what_grafana_would_silently_ignore():
    """The check can fail: a misspelt key or a target without its query is refused."""
    dash = json.loads((DEPLOY / "grafana" / "rearrange.json").read_text())
    schema = json.loads((DATA / "grafana_dashboard.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    panel = next(p for p in dash["panels"] if p["type"] == "timeseries")
    panel["gridpos"] = panel.pop("gridPos")
    assert not validator.is_valid(dash)
    panel["gridPos"] = panel.pop("gridpos")
    del panel["targets"][0]["expr"]
    assert not validator.is_valid(dash)


def test_no_created_series_are_exported():
    assert not [s.name for f in Metrics().registry.collect() for s in f.samples
                if s.name.endswith("_created")]


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
                 "rearrange_experiment_assignments_total", "rearrange_rule_actions_total",
                 "process_resident_memory_bytes", "rearrange_memory_limit_bytes",
                 "rearrange_rule_errors_total", "rearrange_rule_skipped_total"):
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
    assert {"RearrangeReplicaDown", "RearrangeAllReplicasDown", "RearrangeLatencyHigh",
            "RearrangeReplicaServesNoReranks"} <= names
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}
        assert rule["expr"].count("(") == rule["expr"].count(")")
        used = set(METRIC.findall(rule["expr"]))
        if rule["expr"].startswith(("up{", "absent(up{")):  # the scrape itself, not ours
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


def documented() -> dict[str, set[str]]:
    """docs/metrics.md's table: each series name → the labels its row lists."""
    rows = {}
    for line in (DEPLOY.parent / "docs" / "metrics.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        labels = set() if cells[2] == "—" else {x.strip() for x in cells[2].split(",")}
        for name in re.findall(r"`([a-z0-9_]+)`", cells[0]):
            rows[name] = labels
    return rows


def test_docs_document_every_metric_and_its_labels():
    rows = documented()
    metrics = Metrics()
    for kind in CACHE_KINDS:  # registered by build_service; their families exist empty too
        metrics.track_caches(kind, lambda k=kind: [("default", k, 1, 1, 0, 1, 10)])
    # The label names of a family with no sample yet: from the engine's tables, the
    # prometheus_client metric or the collector's family
    declared = {name.removesuffix("_total"): labels
                for name, (_, labels) in {**ENGINE_COUNTERS, **ENGINE_HISTOGRAMS}.items()}
    for collector in set(metrics.registry._names_to_collectors.values()):
        for family in collector.describe() if hasattr(collector, "describe") else ():
            declared.setdefault(family.name, getattr(collector, "_labelnames", None)
                                or getattr(family, "_labelnames", ()))
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert name in rows, f"{name} is not in docs/metrics.md's table"
        labels = ({label for s in family.samples for label in s.labels} - {"le"}
                  if family.samples else set(declared.get(family.name, ())))
        assert labels == rows[name], (name, labels, rows[name])
    # and only what is exported (the workers' series: tests/observability/test_workers.py)
    assert set(rows) - {f.name + s for f in metrics.registry.collect()
                        for s in ("", "_total")} <= {"rearrange_workers"}
