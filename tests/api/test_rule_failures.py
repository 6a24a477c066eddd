"""Rules that fail safely and Python rules, through the real app (CONTRACT "When a rule
fails", "Python rules"): plugin modules from tests/plugins, a real banlist store."""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config.settings import Settings
from app.engine.service import FailureLog
from app.main import create_app
from tests.conftest import AUTH, TOKENS
from tests.helpers import counted

pytestmark = pytest.mark.usefixtures("plugin_path")


def serve(tmp_path: Path, yaml: str) -> TestClient:
    config = tmp_path / "rules.yaml"
    config.write_text(yaml)
    return TestClient(create_app(Settings(
        config=config, banlist_path=tmp_path / "banlist.jsonl", admin_tokens=TOKENS,
        audit_log=str(tmp_path / "audit.jsonl"), config_poll_seconds=0, redis_url=None,
        banlist_seed=None)))


def profile(phases: str, extra: str = "") -> str:
    return f"plugins: [rr_business, rr_faulty]\nprofiles:\n  default: {phases}\n{extra}"


def page(n: int = 4, **extra):
    docs = [{"id": f"d{i}", "url": f"https://h{i}.example/p", "score": 10.0 - i}
            for i in range(n)]
    return {"query": {"text": "q", "region": "RU"}, "documents": docs, **extra}


def errors_metric(client: TestClient, rule: str, phase: str) -> float:
    text = client.get("/metrics").text
    m = re.search(rf'rearrange_rule_errors_total{{phase="{phase}",rule="{rule}"}} (\S+)', text)
    return float(m[1]) if m else 0.0


def test_a_closed_rule_that_raises_answers_503(tmp_path):
    with serve(tmp_path, profile("{pre-filter: [banlist, raises], trim: [depth]}")) as client:
        r = client.post("/v1/rerank", json=page())
        assert r.status_code == 503
        assert r.json() == {"error": "rule_failed", "rule": "raises", "phase": "pre-filter",
                            "problem": "raised RuntimeError: boom in pre-filter"}
        assert errors_metric(client, "raises", "pre-filter") == 1
        assert 'rearrange_requests_total{outcome="rule_failed",profile="default"} 1.0' in \
            client.get("/metrics").text


def test_an_open_rule_that_raises_is_skipped_and_the_page_goes_on(tmp_path):
    yaml = profile("{rerank: [{demote_host: {host: h0.example, by: 20}}, raises], "
                   "post-filter: [{raises: {on_error: open}}]}")
    with serve(tmp_path, yaml) as client:
        out = client.post("/v1/rerank", json=page()).json()
        # the demotion before it stands; the failing rule left the page as it received it
        assert [d["id"] for d in out["documents"]] == ["d1", "d2", "d3", "d0"]
        assert out["skipped"] == [{"rule": "raises", "phase": "rerank", "reason": "error"},
                                  {"rule": "raises", "phase": "post-filter", "reason": "error"}]
        assert {r["rule"] for r in out["audit"]} == {"demote_host", "sort"}
        assert errors_metric(client, "raises", "rerank") == 1
        assert errors_metric(client, "raises", "post-filter") == 1


FAULTS = [
    ("unknown_id", "documents[4]: id 'not-in-the-page' was not in its input"),
    ("duplicate_id", "documents[4]: id 'd0' appears twice"),
    ("nan_score", "documents[0] d0: score nan is not a finite number within ±1e+15"),
    ("silent_removal", "removed 'd3' without a remove or trim record"),
    ("silent_rescore", "rescored 'd0' without a rescore record"),
    ("not_a_pair", "returned list, not (documents, records)"),
]


@pytest.mark.parametrize(("rule", "problem"), FAULTS)
def test_a_refused_output_is_a_failure_of_that_rule(tmp_path, rule, problem):
    yaml = profile(f"{{diversify: [{{{rule}: {{on_error: closed}}}}], "
                   f"annotate: [ad_label, {rule}]}}")
    with serve(tmp_path, yaml) as client:
        r = client.post("/v1/rerank", json=page())
        assert r.status_code == 503, r.text
        assert r.json() == {"error": "rule_failed", "rule": rule, "phase": "diversify",
                            "problem": f"returned output the runner refuses: {problem}"}
        # open (annotate's default) in the second step: the page is served as it came
        open_only = profile(f"{{annotate: [ad_label, {rule}]}}")
    with serve(tmp_path, open_only) as client:
        body = page()
        body["documents"][1]["is_ad"] = True
        out = client.post("/v1/rerank", json=body).json()
        assert [(d["id"], d["score"], d["annotations"]) for d in out["documents"]] == [
            ("d0", 10.0, []), ("d1", 9.0, ["ad"]), ("d2", 8.0, []), ("d3", 7.0, [])]
        assert out["skipped"] == [{"rule": rule, "phase": "annotate", "reason": "error"}]
        assert [r["rule"] for r in out["audit"]] == ["ad_label"]
        assert errors_metric(client, rule, "annotate") == 1


def test_a_well_behaved_python_rule_changes_the_page_with_its_records(tmp_path):
    seen_path = tmp_path / "seen.jsonl"
    yaml = profile(f"{{pre-filter: [{{drop_topic: {{topic: casino, seen_path: '{seen_path}'}}}}], "
                   "rerank: [{demote_host: {host: h0.example, by: 2.5}}], "
                   "diversify: [reverse], trim: [{depth: {k: 2}}]}")
    with serve(tmp_path, yaml) as client:
        body = page(4, unit={"user_id": "u-1"})
        body["documents"][2]["topics"] = ["casino", "games"]
        body["query"]["classes"] = ["shopping"]
        out = client.post("/v1/rerank", json=body).json()
        # d2 dropped; d0 10 -> 7.5, below d1 (9); reversed: d3, d0, d1; top 2 kept
        assert [(d["id"], d["score"]) for d in out["documents"]] == [("d3", 7.0), ("d0", 7.5)]
        assert out["removed"][0] == {"id": "d2", "rule": "drop_topic", "phase": "pre-filter",
                                     "action": "remove", "reason": "topic casino"}
        audit = {(r["rule"], r["doc_id"], r["action"]): r for r in out["audit"]}
        assert audit[("demote_host", "d0", "rescore")] == {
            "rule": "demote_host", "phase": "rerank", "doc_id": "d0", "action": "rescore",
            "reason": "host h0.example demoted by 2.5", "delta": -2.5, "mode": "applied"}
        assert audit[("sort", "d0", "move")]["delta"] == 1
        # reversed d1, d0, d3: the runner fills in the deltas the rule left null
        assert audit[("reverse", "d3", "move")]["delta"] == -2
        assert audit[("reverse", "d1", "move")]["delta"] == 2
        assert audit[("reverse", "d1", "move")]["mode"] == "applied"
        assert ("reverse", "d0", "move") not in audit and "skipped" not in out
        # what the rule was given: the request's documents and query as dicts
        seen = json.loads(seen_path.read_text().splitlines()[-1])
        assert seen["context"] == {"query": {"text": "q", "classes": ["shopping"],
                                             "region": "RU", "age_mode": "moderate"},
                                   "profile": "default", "variants": {}, "phase": "pre-filter"}
        assert seen["documents"][2] == {"id": "d2", "url": "https://h2.example/p",
                                        "score": 8.0, "topics": ["casino", "games"]}


def test_a_gated_python_rule_runs_in_shadow_outside_its_treatment(tmp_path):
    exp = ("experiments: [{name: demote_v1, unit: user_id, rules: [demote_host, raises], "
           "variants: {control: 50, treatment: 50}}]\n")
    yaml = profile("{pre-filter: [raises], rerank: [{demote_host: {host: h0.example, "
                   "by: 5}}]}", exp)
    with serve(tmp_path, yaml) as client:
        out = client.post("/v1/rerank", json=page()).json()  # no unit: outside, shadow
        assert [(d["id"], d["score"]) for d in out["documents"]] == [
            ("d0", 10.0), ("d1", 9.0), ("d2", 8.0), ("d3", 7.0)]
        assert [(r["rule"], r["mode"], r["delta"]) for r in out["audit"]] == [
            ("demote_host", "shadow", -5.0)]
        # a shadow rule never fails the request, closed or not; it is counted and listed
        assert out["skipped"] == [{"rule": "raises", "phase": "pre-filter", "reason": "error"}]
        assert errors_metric(client, "raises", "pre-filter") == 1
        forced = client.post("/v1/rerank", json=page(), headers={
            **AUTH, "X-Rearrange-Force-Variant": "demote_v1=treatment"})
        assert forced.status_code == 503 and forced.json()["rule"] == "raises"
    gated = profile("{rerank: [{demote_host: {host: h0.example, by: 5}}]}", exp.replace(
        ", raises", ""))
    with serve(tmp_path, gated) as client:
        out = client.post("/v1/rerank", json=page(), headers={
            **AUTH, "X-Rearrange-Force-Variant": "demote_v1=treatment"}).json()
        assert [d["id"] for d in out["documents"]] == ["d1", "d2", "d3", "d0"]
        assert out["audit"][0]["mode"] == "applied"


def test_disabled_and_windowed_steps_do_not_run(tmp_path):
    yaml = profile("{pre-filter: [{raises: {enabled: false}}, "
                   "{raises: {valid_until: 2001-01-01T00:00:00Z}}, "
                   "{raises: {valid_from: 2999-01-01T00:00:00+02:00}}, "
                   "{drop_topic: {topic: x, valid_from: 2001-01-01T00:00:00Z, "
                   "valid_until: 2999-01-01T00:00:00Z}}]}")
    with serve(tmp_path, yaml) as client:
        body = page()
        body["documents"][0]["topics"] = ["x"]
        r = client.post("/v1/rerank", json=body)
        assert r.status_code == 200 and "skipped" not in r.json()
        assert [d["id"] for d in r.json()["documents"]] == ["d1", "d2", "d3"]


def test_failures_are_logged_with_the_cause_at_most_once_per_interval(tmp_path, caplog):
    now = [100.0]
    with serve(tmp_path, profile("{rerank: [raises]}")) as client:
        rearranger = client.app.state.services.rearranger
        rearranger.failures = FailureLog(interval=10, clock=lambda: now[0])
        with caplog.at_level(logging.ERROR, logger="rearrange.rules"):
            for _ in range(3):
                client.post("/v1/rerank", json=page())
            now[0] += 10
            client.post("/v1/rerank", json=page())
        lines = [r for r in caplog.records if r.name == "rearrange.rules"]
        assert [r.getMessage() for r in lines] == [
            "rule raises in rerank (profile default) failed, page served without it: "
            "raised RuntimeError: boom in rerank",
            "rule raises in rerank (profile default) failed, page served without it: "
            "raised RuntimeError: boom in rerank (2 more since the last line)"]
        assert "RuntimeError: boom in rerank" in lines[0].exc_text
        assert errors_metric(client, "raises", "rerank") == 4


def test_a_python_rule_reached_with_no_time_left_counts_as_the_timeout_it_is(tmp_path):
    # The first sleeper is given up at the request's deadline, so the second is reached
    # with nothing left of it: not called, failed as a timeout, and counted as one.
    yaml = ("plugins: [rr_hostile]\nprofiles:\n  default: {pre-filter: [{sleeper: "
            "{seconds: 0.3, on_error: open}}], rerank: [{sleeper: {seconds: 0.3, "
            "on_error: open}}]}\n")
    with serve(tmp_path, yaml) as client:
        out = client.post("/v1/rerank", json=page()).json()
        assert out["skipped"] == [{"rule": "sleeper", "phase": "pre-filter", "reason": "error"},
                                  {"rule": "sleeper", "phase": "rerank", "reason": "error"}]
        assert counted(client, "rearrange_python_rule_events_total", rule="sleeper",
                       event="timeout") == 2
