"""The Rust Engine end to end: bodies in, the response and audit line out. Whole responses
of this config's kind are held to the golden HTTP files (tests/golden/)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from app._engine import Engine, EngineMetrics
from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.config.load import load_bytes
from app.observability.metrics import Metrics
from tests.engine_spec import compile_spec

CONFIG = b"""
profiles:
  default:
    pre-filter: [banlist, regional_removals, {topic_filter: {blocked_topics: [casino]}},
                 safe_search, spam_ban]
    rerank: [spam_demotion, sandbox_damping]
    diversify: [{host_crowding: {max_per_host: 1}}]
    trim: [{depth: {k: 4}}]
    annotate: [ad_label, age_label]
    post-filter: [safe_search, empty_result_fallback]
  commercial:
    extends: default
    rerank: [anti_seo_reset, spam_demotion, sandbox_damping]
    trim: [{host_quota: {max_per_host: 1}}, depth]
routing:
  commercial: commercial
experiments:
  - name: antispam_v7
    unit: user_id
    variants:
      control: 50
      treatment: {weight: 50, params: {spam_demotion: {lambda: 2}}}
    rules: [spam_demotion]
"""
NOW = 1_900_000_000.0
BANNED = [Entry("12", "domain", "banned.example", "legal removal", "tns", 0.0, None,
                frozenset())]
BANS = BanIndex(BANNED, version=7)


def page(**extra: Any) -> dict[str, Any]:
    docs = [
        {"id": "a", "url": "https://shop.example/1", "score": 10.0, "spam_score": 0.5,
         "attributes": {"k": [1, "x"]}},
        {"id": "b", "url": "https://shop.example/2", "score": 9.5, "is_ad": True},
        {"id": "c", "url": "https://banned.example/x", "score": 9.0},
        {"id": "d", "url": "https://young.example/", "score": 8.0, "domain_age_days": 30},
        {"id": "e", "url": "https://e.example/", "score": 7.5, "adult_score": 0.6,
         "factors": {"link": 3.0, "behav": 1.25, "text": 1.0}},
        {"id": "f", "url": "https://f.example/", "score": 7.0, "topics": ["casino"]},
        {"id": "g", "url": "https://g.example/", "score": 6.0, "blocked_regions": ["de"]},
        {"id": "h", "url": "https://h.example/", "score": 5.0, "spam_score": 0.99},
        {"id": "i", "url": "https://i.example/", "score": 4.0, "spam_score": 0.7},
        {"id": "j", "url": "https://j.example/", "score": 3.0},
    ]
    return {"request_id": "r-1", "query": {"text": "диван", "region": "de"},
            "documents": docs, **extra}


def engine(config: bytes = CONFIG, rules: list[Any] | None = None,
           extra: dict[str, list[dict[str, Any]]] | None = None,
           metrics: EngineMetrics | None = None) -> Engine:
    return Engine(compile_spec(load_bytes(config), extra=extra), rules or [],
                  metrics or EngineMetrics())


def run(e: Engine, body: dict[str, Any], **kw: Any) -> tuple[int, Any, Any]:
    kw = {"banlist": BANS, "now": NOW, **kw}
    status, out, line, _, _ = e.rerank(json.dumps(body).encode(), **kw)
    return status, json.loads(out), None if line is None else json.loads(line)


def test_relax_rerun_and_pipeline_fallback() -> None:
    docs = [{"id": f"x{i}", "url": f"https://x{i}.example/", "score": 1.0,
             "adult_score": 0.6} for i in range(3)]
    body = {"request_id": "r", "query": {"age_mode": "strict"}, "documents": docs}
    _, relaxed, _ = run(engine(), body)
    # strict (0.5) removes all three; moderate (0.8) keeps them
    assert [d["id"] for d in relaxed["documents"]] == ["x0", "x1", "x2"]
    assert relaxed["fallback"] == {"rule": "empty_result_fallback", "action": "relax",
                                   "reason": "filters removed all 3 documents under age_mode "
                                             "strict; reran with age_mode moderate"}
    no_fallback = CONFIG.replace(b"post-filter: [safe_search, empty_result_fallback]",
                                 b"post-filter: [safe_search]")
    body["query"] = {"age_mode": "moderate"}
    for d in docs:
        d["adult_score"] = 0.9
    status, result, _ = run(engine(no_fallback), body)
    assert result["documents"] == []
    assert result["fallback"] == {"rule": "pipeline", "action": "empty", "reason":
                                  "filters removed all 3 documents; nothing safe was found"}


def test_audit_line_and_errors() -> None:
    e = engine()
    status, out, line = run(e, page(unit={"user_id": "u-1"}), forced_by="qa",
                            forced={"antispam_v7": "control"})
    assert status == 200
    assert line["forced_by"] == "qa"
    assert line["experiments"] == [{"experiment": "antispam_v7", "variant": "control",
                                    "bucket": 8340, "layer": None, "salt": None,
                                    "forced": True}]
    assert line["query"] == {"text": "диван", "region": "DE"}
    # the line's records are the response's with each document's URL and canonical host
    assert [{k: v for k, v in r.items() if k not in ("url", "host")} for r in line["audit"]
            ] == out["audit"] and line["ts"] == NOW
    assert line["audit"][0]["url"] == "https://banned.example/x"
    assert line["audit"][0]["host"] == "banned.example"
    # Without an audit log to write to, the service asks for no line: same response.
    raw = json.dumps(page(unit={"user_id": "u-1"})).encode()
    with_line = e.rerank(raw, banlist=BANS, now=NOW)
    without = e.rerank(raw, banlist=BANS, now=NOW, audit_line=False)
    assert with_line[2] is not None and without[2] is None
    assert without[:2] == with_line[:2]
    assert {r["mode"] for r in out["audit"] if r["rule"] == "spam_demotion"} == {"shadow"}
    status, out, line = run(e, page(profile="nope"))
    assert (status, out) == (422, {"error": "invalid_request", "field": "profile",
                                   "problem": "unknown profile 'nope' (known: commercial, "
                                              "default)"})
    assert line is None
    status, out, _ = run(e, page(), forced={"antispam_v7": "blue"})
    assert out["field"] == "X-Rearrange-Force-Variant"
    assert out["problem"] == ("experiment antispam_v7 has no variant 'blue' "
                              "(variants: control, treatment)")
    status, out, _, _, _ = e.rerank(b"{", now=NOW)
    assert status == 400


def test_an_unopenable_url_is_removed_by_the_banlist_not_refused() -> None:
    body = {"documents": [{"id": "a", "url": "http://[::1", "score": 1.0},
                          {"id": "b", "url": "https://ok.example/", "score": 0.5}]}
    status, out, _ = run(engine(), body)
    assert status == 200
    assert [d["id"] for d in out["documents"]] == ["b"]
    assert out["removed"][0]["id"] == "a"
    assert out["removed"][0]["reason"].startswith("URL cannot be opened: ")
    assert len(out["request_id"]) == 32


class Boost:
    """A Python rule: adds 100 to the score of `x`-prefixed ids and drops `drop`."""

    def __call__(self, documents: list[dict], context: dict) -> tuple[list, list]:
        self.context = context
        self.seen = documents
        out, records = [], []
        for d in documents:
            if d["id"] == "drop":
                records.append({"doc_id": d["id"], "action": "remove", "reason": "no",
                                "delta": None})
                continue
            if d["id"].startswith("x"):
                d = {**d, "score": d["score"] + 100}
                records.append({"doc_id": d["id"], "action": "rescore", "reason": "boost",
                                "delta": 100})
            out.append(d)
        return out, records


def python_step(phase: str, index: int = 0, **keys: Any) -> dict[str, Any]:
    return {"phase": phase, "rule": "boost", "params": {}, "python": index, **keys}


def test_python_rules_run_like_built_ins() -> None:
    rule = Boost()
    e = engine(rules=[rule], extra={"default": [python_step("rerank")]})
    body = {"query": {"text": "q"}, "documents": [
        {"id": "a", "url": "https://a.example/", "score": 2.0, "attributes": {"z": 1}},
        {"id": "drop", "url": "https://d.example/", "score": 1.5},
        {"id": "x1", "url": "https://x.example/", "score": 1.0}]}
    status, out, _ = run(e, body)
    assert status == 200
    assert [d["id"] for d in out["documents"]] == ["x1", "a"]
    assert out["documents"][0]["score"] == 101.0
    boost = [r for r in out["audit"] if r["rule"] == "boost"]
    assert [(r["action"], r["delta"], r["phase"], r["mode"]) for r in boost] == [
        ("remove", None, "rerank", "applied"), ("rescore", 100, "rerank", "applied")]
    assert rule.context == {"query": {"text": "q", "classes": [], "region": None,
                                      "age_mode": "moderate"},
                            "profile": "default", "variants": {}, "phase": "rerank"}
    assert rule.seen[0]["attributes"] == {"z": 1}


def broken(documents: list[dict], context: dict) -> tuple[list, list]:
    raise RuntimeError("boom")


def lying(documents: list[dict], context: dict) -> tuple[list, list]:
    return [{**d, "score": d["score"] + 1} for d in documents], []  # rescores unrecorded


def intruder(documents: list[dict], context: dict) -> tuple[list, list]:
    return [*documents, {"id": "zz", "score": 1.0}], []


@pytest.mark.parametrize("rule, problem", [
    (broken, "raised RuntimeError: boom"),
    (lying, "returned output the runner refuses: rescored 'a' without a rescore record"),
    (intruder, "returned output the runner refuses: documents[1]: id 'zz' was not in its "
               "input"),
])
def test_failing_python_rules_follow_on_error(rule: Any, problem: str) -> None:
    body = {"documents": [{"id": "a", "url": "https://a.example/", "score": 2.0}]}
    metrics = EngineMetrics()
    closed = engine(rules=[rule], extra={"default": [python_step("pre-filter")]},
                    metrics=metrics)
    status, out, _ = run(closed, body)
    assert (status, out) == (503, {"error": "rule_failed", "rule": "boost",
                                   "phase": "pre-filter", "problem": problem})
    opened = engine(rules=[rule], extra={"default": [python_step("rerank")]},
                    metrics=metrics)
    status, out, _ = run(opened, body)
    assert status == 200
    assert out["skipped"] == [{"rule": "boost", "phase": "rerank", "reason": "error"}]
    assert [d["score"] for d in out["documents"]] == [2.0]
    counters = metrics.snapshot()["counters"]
    assert sorted(counters["rearrange_rule_errors_total"]) == [
        (("boost", "pre-filter"), 1.0), (("boost", "rerank"), 1.0)]
    assert (("default", "rule_failed"), 1.0) in counters["rearrange_requests_total"]


def test_reserved_keys_disable_and_window_steps() -> None:
    body = {"documents": [{"id": "drop", "url": "https://a.example/", "score": 2.0}]}
    rule = Boost()
    for keys in ({"enabled": False}, {"valid_from": NOW + 1}, {"valid_until": NOW}):
        e = engine(rules=[rule], extra={"default": [python_step("rerank", **keys)]})
        assert [d["id"] for d in run(e, body)[1]["documents"]] == ["drop"]
    e = engine(rules=[rule], extra={"default": [python_step("rerank", valid_from=NOW - 1,
                                                            valid_until=NOW + 1)]})
    assert run(e, body)[1]["documents"] == []


def test_metrics_snapshot_counts_what_the_request_did() -> None:
    metrics = EngineMetrics()
    run(engine(metrics=metrics), page(unit={"user_id": "u-1"}))
    snap = metrics.snapshot()
    counters = dict(snap["counters"]["rearrange_rule_actions"])
    assert counters[("banlist", "pre-filter", "remove", "applied", "default")] == 1.0
    assert counters[("sort", "rerank", "move", "applied", "default")] >= 1
    assert dict(snap["counters"]["rearrange_experiment_assignments_total"]) == {
        ("antispam_v7", "treatment"): 1.0}
    hist = dict((k, (c, s)) for k, c, s in snap["histograms"]["rearrange_rule_duration_seconds"])
    counts, _ = hist[("depth", "trim", "applied")]
    assert sum(counts) == 1 and len(counts) == len(snap["bounds"]
                                                   ["rearrange_rule_duration_seconds"]) + 1
    assert EngineMetrics.buckets()["rearrange_rule_top10_churn"] == [float(n) for n in range(11)]


def test_the_collector_exports_the_engine_series_at_scrape() -> None:
    from prometheus_client import generate_latest

    from app.observability.metrics import (
        CHURN_BUCKETS,
        LATENCY_BUCKETS,
        POSITION_BUCKETS,
        RULE_BUCKETS,
        SCORE_BUCKETS,
    )

    shared = EngineMetrics()
    metrics = Metrics(engine_metrics=shared)
    run(engine(metrics=shared), page(unit={"user_id": "u-1"}))
    metrics.requests.labels("", "timeout").inc()
    text = generate_latest(metrics.registry).decode()
    assert ('rearrange_rule_actions_total{action="remove",mode="applied",phase="pre-filter",'
            'profile="default",rule="banlist"} 1.0') in text
    assert 'rearrange_requests_total{outcome="timeout",profile=""} 1.0' in text
    assert 'rearrange_request_duration_seconds_count{profile="default"} 1.0' in text
    assert 'rearrange_rule_top10_churn_bucket{le="10.0",mode="applied",rule="depth"}' in text
    assert metrics.assignment_counts() == {("antispam_v7", "treatment"): 1.0}
    buckets = EngineMetrics.buckets()
    assert buckets["rearrange_request_duration_seconds"] == list(LATENCY_BUCKETS)
    assert buckets["rearrange_rule_duration_seconds"] == list(RULE_BUCKETS)
    assert buckets["rearrange_rule_position_change"] == [float(b) for b in POSITION_BUCKETS]
    assert buckets["rearrange_rule_score_change"] == [float(b) for b in SCORE_BUCKETS]
    assert buckets["rearrange_rule_top10_churn"] == [float(b) for b in CHURN_BUCKETS]
