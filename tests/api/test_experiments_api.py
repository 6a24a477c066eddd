"""Experiments through the HTTP API: assignment, holdout, QA override, exposure log, metrics,
SRM and refused re-bucketing reloads; metric values are read back from /metrics."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.experiments.bucketing import bucket
from app.main import create_app
from tests.conftest import AUTH

CONFIG = """
profiles:
  default:
    pre-filter: [{spam_ban: {threshold: 0.95}}]
    rerank: [spam_demotion, sandbox_damping]
    annotate: [ad_label]
holdout: {unit: user_id, percent: 10}
experiments:
  - name: antispam_v7
    unit: user_id
    layer: ranking
    slots: [0, 50]
    variants: {control: 50, treatment: 50}
    rules: [spam_demotion]
  - name: sandbox_v2
    unit: user_id
    layer: ranking
    slots: [50, 100]
    variants:
      control: 50
      strong: {weight: 50, params: {sandbox_damping: {beta: 0.9}}}
    rules: [sandbox_damping]
"""
FORCE = "X-Rearrange-Force-Variant"


def user(where: str) -> str:
    """A user id the formula puts in `where` (antispam_v7 control/treatment, or holdout)."""
    for i in range(10_000):
        u = f"user-{i}"
        held = bucket("holdout", u) < 1000
        if where == "holdout":
            if held:
                return u
            continue
        if held or bucket("ranking", u) >= 5000:
            continue
        variant = "control" if bucket("antispam_v7", u) < 5000 else "treatment"
        if variant == where:
            return u
    raise AssertionError(where)


def page(user_id: str | None = None) -> dict:
    body = {"documents": [
        {"id": "a", "url": "http://a.example/1", "score": 10},
        {"id": "s", "url": "http://s.example/1", "score": 9, "spam_score": 0.9},
        {"id": "c", "url": "http://c.example/1", "score": 8},
    ]}
    if user_id is not None:
        body["unit"] = {"user_id": user_id}
    return body


@pytest.fixture
def exp_settings(settings):
    settings.config.write_text(CONFIG)
    return settings


@pytest.fixture
def app_client(exp_settings):
    with TestClient(create_app(exp_settings)) as c:
        yield c


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(all_samples, name, **labels):
    return all_samples.get((name, frozenset(labels.items())))


def test_treatment_control_and_holdout_through_the_api(app_client):
    treated = app_client.post("/v1/rerank", json=page(user("treatment"))).json()
    assert treated["experiments"][0] == {
        "experiment": "antispam_v7", "variant": "treatment",
        "bucket": bucket("antispam_v7", user("treatment")), "layer": "ranking", "salt": None}
    assert [e["experiment"] for e in treated["experiments"]] == ["antispam_v7"]  # one a layer
    assert [d["id"] for d in treated["documents"]] == ["a", "c", "s"]
    control = app_client.post("/v1/rerank", json=page(user("control"))).json()
    assert [d["id"] for d in control["documents"]] == ["a", "s", "c"]
    assert {r["mode"] for r in control["audit"] if r["rule"] == "spam_demotion"} == {"shadow"}
    held = app_client.post("/v1/rerank", json=page(user("holdout"))).json()
    assert [(e["experiment"], e["variant"]) for e in held["experiments"]] == [
        ("holdout", "holdout")]
    assert [d["id"] for d in held["documents"]] == ["a", "s", "c"]
    assert {r["mode"] for r in held["audit"] if r["rule"] == "spam_demotion"} == {"shadow"}
    anonymous = app_client.post("/v1/rerank", json=page()).json()
    assert anonymous["experiments"] == []


def test_metric_values_after_a_known_sequence(app_client):
    for who in ("treatment", "control", "holdout"):
        assert app_client.post("/v1/rerank", json=page(user(who))).status_code == 200
    assert app_client.post("/v1/rerank", json={"documents": "x"}).status_code == 422
    m = samples(app_client.get("/metrics").text)
    assigned = "rearrange_experiment_assignments_total"
    assert value(m, assigned, experiment="antispam_v7", variant="treatment") == 1
    assert value(m, assigned, experiment="antispam_v7", variant="control") == 1
    assert value(m, assigned, experiment="holdout", variant="holdout") == 1
    assert value(m, assigned, experiment="holdout", variant="rest") == 2
    actions = "rearrange_rule_actions_total"
    rescore = {"rule": "spam_demotion", "phase": "rerank", "action": "rescore",
               "profile": "default"}
    assert value(m, actions, mode="applied", **rescore) == 1
    assert value(m, actions, mode="shadow", **rescore) == 2  # control and holdout
    score = "rearrange_rule_score_change"
    demoted = {"rule": "spam_demotion", "direction": "down"}
    assert value(m, score + "_count", mode="applied", **demoted) == 1
    assert value(m, score + "_sum", mode="applied", **demoted) == 5.0
    assert value(m, score + "_bucket", mode="applied", le="5.0", **demoted) == 1
    assert value(m, score + "_bucket", mode="applied", le="2.0", **demoted) == 0
    assert value(m, score + "_count", mode="shadow", **demoted) == 2
    assert value(m, score + "_count", mode="applied", rule="spam_demotion",
                 direction="up") is None
    # demoting s from 2nd to 3rd moves c up one and s down one, applied once, shadowed twice
    pos = "rearrange_rule_position_change"
    for direction in ("up", "down"):
        moved = {"rule": "spam_demotion", "direction": direction}
        assert value(m, pos + "_count", mode="applied", **moved) == 1
        assert value(m, pos + "_bucket", mode="applied", le="1.0", **moved) == 1
        assert value(m, pos + "_sum", mode="shadow", **moved) == 2
    churn = "rearrange_rule_top10_churn"
    assert value(m, churn + "_count", rule="spam_demotion", mode="applied") == 1
    assert value(m, churn + "_sum", rule="spam_demotion", mode="applied") == 0
    assert value(m, churn + "_count", rule="spam_ban", mode="applied") == 3
    assert value(m, "rearrange_rule_duration_seconds_count", rule="spam_demotion",
                 phase="rerank", mode="shadow") == 2
    assert value(m, "rearrange_requests_total", profile="default", outcome="ok") == 3
    http = "rearrange_http_responses_total"
    assert value(m, http, route="/v1/rerank", code="200") == 3
    assert value(m, http, route="/v1/rerank", code="422") == 1
    assert value(m, "rearrange_experiment_srm_p_value", experiment="antispam_v7") == 1.0


def test_qa_override_needs_an_admin_token(app_client):
    u = user("control")
    for headers in ({FORCE: "antispam_v7=treatment"},
                    {FORCE: "antispam_v7=treatment", "Authorization": "Bearer wrong"}):
        r = app_client.post("/v1/rerank", json=page(u), headers=headers)
        assert r.status_code == 401 and r.json()["field"] == FORCE
    for header, problem in (("antispam_v7", "expected experiment=variant"),
                            ("nope=treatment", "unknown experiment 'nope'"),
                            ("antispam_v7=b", "has no variant 'b'"),
                            ("antispam_v7=control, sandbox_v2=strong", "share layer ranking")):
        r = app_client.post("/v1/rerank", json=page(u), headers={FORCE: header, **AUTH})
        assert r.status_code == 422 and r.json()["field"] == FORCE
        assert problem in r.json()["problem"]
    r = app_client.post("/v1/rerank", json=page(u),
                        headers={FORCE: "antispam_v7=treatment", **AUTH}).json()
    assert r["experiments"] == [{"experiment": "antispam_v7", "variant": "treatment",
                                 "bucket": bucket("antispam_v7", u), "layer": "ranking",
                                 "salt": None, "forced": True}]
    assert [d["id"] for d in r["documents"]] == ["a", "c", "s"]  # treatment applied
    m = samples(app_client.get("/metrics").text)
    assert value(m, "rearrange_experiment_assignments_total", experiment="antispam_v7",
                 variant="treatment") is None  # forced requests stay out of the SRM counts


def test_exposure_log_has_every_assigned_request(exp_settings):
    with TestClient(create_app(exp_settings)) as c:
        c.post("/v1/rerank", json={"documents": [], "unit": {"user_id": user("control")},
                                   "request_id": "quiet"})
        c.post("/v1/rerank", json={"documents": [], "request_id": "anonymous"})
        c.post("/v1/rerank", json={**page(user("control")), "request_id": "qa"},
               headers={FORCE: "antispam_v7=treatment", **AUTH})
    with open(exp_settings.audit_log, encoding="utf-8") as fh:
        lines = [json.loads(x) for x in fh]
    by_id = {x["request_id"]: x for x in lines}
    assert "anonymous" not in by_id  # nothing assigned, nothing changed
    assert by_id["quiet"]["audit"] == []
    assert by_id["quiet"]["experiments"] == [{
        "experiment": "antispam_v7", "variant": "control",
        "bucket": bucket("antispam_v7", user("control")), "layer": "ranking", "salt": None}]
    assert by_id["qa"]["forced_by"] == "tns" and by_id["qa"]["experiments"][0]["forced"]


def test_the_qa_header_is_in_the_openapi_document(app_client):
    params = app_client.get("/openapi.json").json()["paths"]["/v1/rerank"]["post"]["parameters"]
    assert [p["name"] for p in params] == ["x-rearrange-force-variant", "x-rearrange-explain"]


def test_srm_endpoint_and_experiment_listing(app_client):
    for i in range(40):
        app_client.post("/v1/rerank", json={"documents": [], "unit": {"user_id": f"u{i}"}})
    srm = app_client.get("/v1/experiments/srm").json()
    by_name = {e["experiment"]: e for e in srm["experiments"]}
    assert set(by_name) == {"antispam_v7", "sandbox_v2", "holdout"}
    total = sum(by_name["antispam_v7"]["observed"].values()) + \
        sum(by_name["sandbox_v2"]["observed"].values()) + by_name["holdout"]["observed"]["holdout"]
    assert total == 40 and srm["alpha"] == 0.001
    assert by_name["holdout"]["expected"] == {"holdout": 4.0, "rest": 36.0}
    listing = app_client.get("/v1/experiments").json()
    assert listing["holdout"] == {"unit": "user_id", "percent": 10.0, "salt": None}
    assert listing["experiments"][1]["variants"] == {"control": [0, 5000],
                                                     "strong": [5000, 10000]}


def test_reload_that_would_rebucket_is_refused_and_old_config_serves(app_client, exp_settings):
    before = app_client.post("/v1/rerank", json=page()).json()["config_version"]
    exp_settings.config.write_text(CONFIG.replace("slots: [0, 50]", "slots: [10, 50]"))
    r = app_client.post("/v1/admin/config/reload", headers=AUTH)
    assert r.status_code == 422
    assert r.json()["field"] == "experiments[0] antispam_v7"
    assert "not a widening" in r.json()["problem"] and r.json()["serving"] == before
    assert app_client.post("/v1/rerank", json=page()).json()["config_version"] == before
    exp_settings.config.write_text(CONFIG.replace("    layer: ranking\n    slots: [0, 50]",
                                                  "    layer: ranking\n    slots: [10, 50]\n"
                                                  "    salt: restart-2"))
    r = app_client.post("/v1/admin/config/reload", headers=AUTH)
    assert r.status_code == 200 and r.json()["changed"] is True


def test_triggered_exposures_in_the_audit_line_and_metrics(exp_settings):
    """An exposure is triggered when a rule its experiment gates left a record: it changed
    the page (treatment) or would have (control's shadow run); the holdout's when any gated
    rule did. A page with no spam gives spam_demotion nothing to do."""
    clean = {"documents": [{"id": "a", "url": "http://a.example/1", "score": 10}]}
    sent = {
        "control-spam": page(user("control")),
        "treatment-spam": page(user("treatment")),
        "control-clean": {**clean, "unit": {"user_id": user("control")}},
        "holdout-spam": page(user("holdout")),
        "holdout-clean": {**clean, "unit": {"user_id": user("holdout")}},
    }
    with TestClient(create_app(exp_settings)) as c:
        for request_id, body in sent.items():
            assert c.post("/v1/rerank", json={**body, "request_id": request_id}).is_success
        m = samples(c.get("/metrics").text)
    with open(exp_settings.audit_log, encoding="utf-8") as fh:
        lines = {x["request_id"]: x for x in map(json.loads, fh)}
    expected = {"control-spam": True, "treatment-spam": True, "control-clean": False,
                "holdout-spam": True, "holdout-clean": False}
    for request_id, triggered in expected.items():
        line = lines[request_id]
        variant = request_id.split("-")[0]
        experiment = "holdout" if variant == "holdout" else "antispam_v7"
        assert line["exposures"] == [{
            "unit": sent[request_id]["unit"]["user_id"], "experiment": experiment,
            "variant": variant, "triggered": triggered, "request_id": request_id,
            "time": line["ts"]}]
    exposures = "rearrange_experiment_exposures_total"
    for variant, triggered, n in (("control", "true", 1), ("control", "false", 1),
                                  ("treatment", "true", 1), ("treatment", "false", None)):
        assert value(m, exposures, experiment="antispam_v7", variant=variant,
                     triggered=triggered) == n
    for triggered in ("true", "false"):
        assert value(m, exposures, experiment="holdout", variant="holdout",
                     triggered=triggered) == 1
