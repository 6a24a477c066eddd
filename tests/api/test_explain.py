"""`X-Rearrange-Explain: true` (QA): every step of the run, what it did or why it did not
run, and the page after it; checked against the same response's documents and audit."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import AUTH

EXPLAIN = "X-Rearrange-Explain"
CONFIG = """
profiles:
  default:
    pre-filter:
      - banlist
      - regional_removals
      - {safe_search: {thresholds: {strict: 0.5, moderate: 0.8}}}
    rerank: [spam_demotion]
    diversify: [{host_crowding: {max_per_host: 1}}]
    trim: [{depth: {k: 3}}]
    annotate:
      - {ad_label: {enabled: false}}
      - {age_label: {valid_from: "2999-01-01T00:00:00Z"}}
    post-filter: [empty_result_fallback]
  commercial:
    extends: default
    rerank: [anti_seo_reset, spam_demotion]
    annotate: [ad_label]
routing: {commercial: commercial}
experiments:
  - name: antispam_v7
    unit: user_id
    variants: {control: 50, treatment: 50}
    rules: [spam_demotion]
"""


def body(**query) -> dict:
    return {"query": {"text": "sofa", **query}, "documents": [
        {"id": "a1", "url": "http://a.example/1", "score": 10},
        {"id": "s", "url": "http://s.example/1", "score": 9, "spam_score": 0.9},
        {"id": "a2", "url": "http://a.example/2", "score": 8},
        {"id": "c", "url": "http://c.example/1", "score": 7},
        {"id": "x", "url": "http://x.example/1", "score": 6, "adult_score": 0.95},
        {"id": "d", "url": "http://d.example/1", "score": 5},
    ]}


@pytest.fixture
def client(settings):
    settings.config.write_text(CONFIG)
    with TestClient(create_app(settings)) as c:
        yield c


def explained(client, payload, headers=None):
    r = client.post("/v1/rerank", json=payload, headers={EXPLAIN: "true", **AUTH,
                                                         **(headers or {})})
    assert r.status_code == 200, r.text
    return r.json()


def test_every_step_is_listed_with_what_it_did_and_the_page_after_it(client):
    out = explained(client, body())
    steps = [(s["rule"], s["phase"], s["status"]) for s in out["explain"]["steps"]]
    assert steps == [
        ("banlist", "pre-filter", "no_match"),
        ("regional_removals", "pre-filter", "not_applicable"),
        ("safe_search", "pre-filter", "applied"),
        ("spam_demotion", "rerank", "shadow"),  # no user_id: not in the experiment
        ("sort", "rerank", "no_match"),
        ("host_crowding", "diversify", "applied"),
        ("depth", "trim", "applied"),
        ("ad_label", "annotate", "disabled"),
        ("age_label", "annotate", "outside_window"),
        ("empty_result_fallback", "post-filter", "no_match"),
    ]
    by_rule = {s["rule"]: s for s in out["explain"]["steps"]}
    assert by_rule["regional_removals"]["why"] == "the query has no region"
    assert by_rule["regional_removals"]["page"] is None
    assert by_rule["ad_label"]["why"] == "enabled: false"
    assert by_rule["age_label"]["why"] == "valid from 2999-01-01T00:00:00Z"
    assert by_rule["spam_demotion"]["why"] == "experiment antispam_v7: this request is not in it"
    assert by_rule["spam_demotion"]["mode"] == "shadow"
    assert by_rule["safe_search"]["page"] == ["a1", "s", "a2", "c", "d"]
    assert by_rule["host_crowding"]["page"] == ["a1", "s", "c", "d"]
    # The page after the last step is the page served.
    assert out["explain"]["steps"][-1]["page"] == [d["id"] for d in out["documents"]]
    # Each step's record count is its records in the audit.
    for step in out["explain"]["steps"]:
        audit = [r for r in out["audit"] if (r["rule"], r["phase"]) == (step["rule"],
                                                                        step["phase"])]
        assert step["records"] == len(audit), step
    assert out["explain"]["not_in_profile"] == [
        {"rule": "anti_seo_reset", "phase": "rerank", "profiles": ["commercial"]}]


def test_the_commercial_profile_lists_its_own_steps_and_what_only_default_has(client):
    out = explained(client, body(classes=["commercial"]))
    assert out["profile"] == "commercial"
    rules = [s["rule"] for s in out["explain"]["steps"]]
    assert rules[3:5] == ["anti_seo_reset", "spam_demotion"]
    assert "ad_label" in rules and "age_label" not in rules  # its annotate replaces default's
    assert out["explain"]["not_in_profile"] == [
        {"rule": "age_label", "phase": "annotate", "profiles": ["default"]}]


def test_without_the_header_or_with_false_the_response_is_unchanged(client):
    plain = client.post("/v1/rerank", json={**body(), "request_id": "r"})
    off = client.post("/v1/rerank", json={**body(), "request_id": "r"},
                      headers={EXPLAIN: "False"})  # no token needed to say no
    assert plain.status_code == off.status_code == 200
    assert "explain" not in plain.json()
    assert off.content == plain.content
    on = explained(client, {**body(), "request_id": "r"})
    assert {k: v for k, v in on.items() if k != "explain"} == plain.json()


def test_a_read_only_token_may_explain(client, settings):
    settings_tokens = settings.admin_tokens + ",qa:qa-token:read"
    settings = settings.model_copy(update={"admin_tokens": settings_tokens})
    with TestClient(create_app(settings)) as c:
        out = explained(c, body(), {"Authorization": "Bearer qa-token"})
    assert "explain" in out


@pytest.mark.parametrize("headers, status, problem", [
    ({EXPLAIN: "true"}, 401, "needs an admin token: Authorization: Bearer <token>"),
    ({EXPLAIN: "true", "Authorization": "Bearer nope"}, 401, "unknown token"),
    ({EXPLAIN: "yes", **AUTH}, 422, "'yes': expected true or false"),
])
def test_explain_needs_a_token_and_a_clear_value(client, headers, status, problem):
    r = client.post("/v1/rerank", json=body(), headers=headers)
    assert r.status_code == status
    assert r.json() == {"error": "invalid_request", "field": EXPLAIN, "problem": problem}


def test_a_relaxed_run_lists_both_attempts(client):
    payload = body(age_mode="strict")
    payload["documents"] = [{"id": "p", "url": "http://p.example/", "score": 1,
                             "adult_score": 0.6}]
    out = explained(client, payload)
    assert out["fallback"]["action"] == "relax"
    attempts = {s["attempt"] for s in out["explain"]["steps"]}
    assert attempts == {1, 2}
    last = [s for s in out["explain"]["steps"] if s["attempt"] == 2][-1]
    assert last["page"] == ["p"]


def test_the_cli_run_explains_offline(tmp_path, settings, capsys):
    from app.cli.main import main
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body()))
    assert main(["run", str(request), "--config", str(settings.config), "--explain"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["explain"]["steps"][-1]["page"] == [d["id"] for d in out["documents"]]


# POST /v1/admin/config/try: one request through a candidate config, not served.

def tried(client, config: str, request: dict, headers=AUTH):
    return client.post("/v1/admin/config/try", json={"config": config, "request": request},
                       headers=headers)


def test_a_candidate_answers_with_its_own_version_and_explain(client, settings):
    candidate = CONFIG.replace("trim: [{depth: {k: 3}}]", "trim: [{depth: {k: 1}}]")
    served = explained(client, body())
    r = tried(client, candidate, body())
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["config_version"] != served["config_version"]
    assert client.get("/readyz").json()["config_version"] == served["config_version"]
    assert [d["id"] for d in out["documents"]] == ["a1"]
    assert [d["id"] for d in served["documents"]] == ["a1", "s", "c"]
    assert out["explain"]["steps"][-1]["page"] == ["a1"]


def test_a_try_is_neither_audit_logged_nor_counted(client, settings):
    def served_requests():
        text = client.get("/metrics").text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("rearrange_requests_total{"))
    before = served_requests()
    assert tried(client, CONFIG, {**body(), "request_id": "tried"}).status_code == 200
    assert served_requests() == before
    # The log is written in order: once the next served request is in it, a try would be.
    client.post("/v1/rerank", json={**body(), "request_id": "served-after"})
    log = Path(settings.audit_log)
    deadline = time.monotonic() + 10
    while '"served-after"' not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the served request never reached the audit log"
        time.sleep(0.05)
    assert '"tried"' not in log.read_text()
    assert served_requests() == before + 1


@pytest.mark.parametrize("config, request_body, status, field, problem", [
    ("profiles: {default: {trim: [{depth: {k: -1}}]}}", body(), 422, "config",
     "profiles.default.trim[0] depth: "),
    ("profiles: [", body(), 422, "config", "config: not valid YAML"),
    (CONFIG, {**body(), "documents": [{"id": "a", "url": "http://a.example/", "score": "x"}]},
     422, "request.documents[0].score", "expected a number, got a string"),
])
def test_a_refused_candidate_or_request_names_the_field(client, config, request_body, status,
                                                         field, problem):
    r = tried(client, config, request_body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field
    assert r.json()["problem"].startswith(problem), r.json()["problem"]


def test_a_candidate_imports_no_module_the_served_config_did_not_load(settings, plugin_path):
    settings.config.write_text("plugins: [rr_business]\n" + CONFIG)
    named = "plugins: [rr_business, rr_import_marker]\n" + CONFIG
    with TestClient(create_app(settings)) as c:
        for plugins in ("[rr_import_marker]", "[rr_business, rr_import_marker]", "[this]"):
            r = tried(c, f"plugins: {plugins}\n{CONFIG}", body())
            assert r.status_code == 422, r.text
            module = plugins.strip("[]").split(", ")[-1]
            at = plugins.strip("[]").split(", ").index(module)
            assert r.json()["field"] == "config"
            assert r.json()["problem"].startswith(
                f"plugins[{at}] {module}: not a module the served config loaded (it loaded: "
                "rr_business)"), r.json()["problem"]
        assert "rr_import_marker" not in sys.modules  # refused before any import
        # the served config's own plugins are named freely (imported already)
        assert tried(c, named.replace(", rr_import_marker", ""), body()).status_code == 200


def test_trying_a_candidate_needs_a_write_token(client, settings):
    settings = settings.model_copy(update={"admin_tokens": settings.admin_tokens
                                           + ",qa:qa-token:read"})
    with TestClient(create_app(settings)) as c:
        assert tried(c, CONFIG, body(), {}).status_code == 401
        r = tried(c, CONFIG, body(), {"Authorization": "Bearer qa-token"})
    assert r.status_code == 403 and "read-only" in r.json()["problem"]


def test_a_backfill_is_a_step_of_its_own_and_ends_on_the_page_served(settings):
    settings.config.write_text("""
profiles:
  default:
    trim: [{depth: {k: 2}}]
    annotate: [ad_label]
    post-filter: [safe_search]
""")
    page = {"documents": [
        {"id": "a", "url": "http://a.example/", "score": 3},
        {"id": "b", "url": "http://b.example/", "score": 2, "adult_score": 0.9},
        {"id": "c", "url": "http://c.example/", "score": 1, "is_ad": True}]}
    with TestClient(create_app(settings)) as c:
        out = explained(c, page)
    steps = [(s["rule"], s["status"], s["records"], s["page"]) for s in out["explain"]["steps"]]
    assert steps == [
        ("sort", "no_match", 0, ["a", "b", "c"]),
        ("depth", "applied", 1, ["a", "b"]),
        ("ad_label", "no_match", 0, ["a", "b"]),  # c is labelled when it comes back
        ("safe_search", "applied", 1, ["a"]),
        ("backfill", "applied", 1, ["a", "c"]),
    ]
    assert [d["id"] for d in out["documents"]] == ["a", "c"]
    assert out["documents"][1]["annotations"] == ["ad"]


# GET /v1/admin/captures: the newest captured requests, for the inspector's picker.

def test_captures_say_when_capture_is_off(client):
    r = client.get("/v1/admin/captures", headers=AUTH)
    assert r.status_code == 200 and r.json() == {"enabled": False, "captures": []}
    assert client.get("/v1/admin/captures").status_code == 401
    bad = client.get("/v1/admin/captures", params={"limit": 0}, headers=AUTH)
    assert bad.status_code == 422 and bad.json()["field"] == "query.limit"


def test_captures_are_the_newest_first_across_workers_files(settings, tmp_path):
    from app.replay.capture import FORMAT
    other = tmp_path / "capture-999.jsonl"  # another worker's file, and a line cut by a crash
    other.write_text(json.dumps({"capture": FORMAT, "ts": 1.0, "status": 200,
                                 "config_version": "x", "banlist_version": 0,
                                 "request": {"request_id": "old", "documents": []}}) + "\n{\"cap")
    settings = settings.model_copy(update={"capture_path": tmp_path / "capture-{pid}.jsonl",
                                           "capture_rate": 1.0})
    with TestClient(create_app(settings)) as c:
        for i in range(3):
            assert c.post("/v1/rerank", json={**body(), "request_id": f"r{i}"}).status_code == 200
        deadline = time.monotonic() + 10
        while len(c.get("/v1/admin/captures", headers=AUTH).json()["captures"]) < 4:
            assert time.monotonic() < deadline, "the captures never reached the file"
            time.sleep(0.05)
        got = c.get("/v1/admin/captures", params={"limit": 3}, headers=AUTH).json()
    assert got["enabled"] is True
    assert [x["request"]["request_id"] for x in got["captures"]] == ["r2", "r1", "r0"]
