"""The sanctions API end to end: feed with a write token, quarantine demotes, ban removes."""
from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import AUTH

SPAM = {"Authorization": "Bearer spam-token"}
NO_PAGE = pytest.mark.python_path("sanctions and lookups only: no page is served")
PAGE = {"documents": [{"id": "a", "url": "http://grey.example/1", "score": 9.0},
                      {"id": "b", "url": "http://ok.example/1", "score": 8.0}]}
RULES = """profiles:
  default:
    pre-filter: [banlist]
    rerank: [{quarantine_demotion: {penalty: 3}}]
    post-filter: [empty_result_fallback]
"""


def test_feed_needs_a_token_and_reports_per_item(client):
    body = {"observations": [{"host": "grey.example", "spam_score": 0.75, "observed_at": 1},
                             {"host": "grey.example", "spam_score": 2, "observed_at": 2}]}
    assert client.post("/v1/sanctions/scores", json=body).status_code == 401
    out = client.post("/v1/sanctions/scores", json=body, headers=SPAM).json()
    assert out["applied"] == 1 and out["refused"] == [
        {"index": 1, "field": "spam_score", "problem": "must be a number in [0, 1]"}]
    assert out["transitions"][0]["to"] == "quarantine"
    assert out["transitions"][0]["actor"] == "antispam"  # the token's actor
    empty = client.post("/v1/sanctions/scores", json={"observations": []}, headers=SPAM)
    assert empty.status_code == 422 and empty.json()["field"] == "body.observations"


def test_quarantine_demotes_then_ban_removes_then_appeal_restores(client, settings):
    settings.config.write_text(RULES)
    client.post("/v1/admin/config/reload", headers=AUTH)
    feed = lambda score, at: client.post(  # noqa: E731
        "/v1/sanctions/scores", headers=SPAM,
        json={"observations": [{"host": "grey.example", "spam_score": score, "observed_at": at}]})
    feed(0.75, 1)
    out = client.post("/v1/rerank", json=PAGE).json()
    assert [d["id"] for d in out["documents"]] == ["b", "a"]
    assert out["documents"][1]["score"] == 6.0
    assert out["audit"][0]["rule"] == "quarantine_demotion"
    feed(0.95, 2)
    out = client.post("/v1/rerank", json=PAGE).json()
    assert [d["id"] for d in out["documents"]] == ["b"]
    assert out["removed"][0]["rule"] == "banlist" and "antispam" not in out["removed"][0]["id"]
    r = client.post("/v1/sanctions/grey.example/clear", headers=AUTH,
                    json={"reason": "appeal: site cleaned", "pin_seconds": 86400})
    assert r.status_code == 200 and r.json()["state"] == "clean" and r.json()["pinned"]
    feed(0.99, 3)
    out = client.post("/v1/rerank", json=PAGE).json()
    assert [d["id"] for d in out["documents"]] == ["a", "b"]
    state = client.get("/v1/sanctions/GREY.example").json()
    assert [(h["to"], h["actor"]) for h in state["history"]] == [
        ("quarantine", "antispam"), ("banned", "antispam"), ("clean", "tns")]
    changes = client.get("/v1/banlist/changes").json()["changes"]
    assert [(c["op"], c["actor"]) for c in changes] == [("add", "antispam"), ("remove", "tns")]
    text = client.get("/metrics").text
    assert 'rearrange_sanction_hosts{state="clean"} 1.0' in text


def test_appeal_validation(client):
    r = client.post("/v1/sanctions/x.example/clear", headers=AUTH, json={"reason": ""})
    assert r.status_code == 422 and r.json()["field"] == "body.reason"
    r = client.post("/v1/sanctions/x.example/clear", headers=AUTH,
                    json={"reason": "r", "pin_seconds": -1})
    assert r.status_code == 422 and r.json()["field"] == "body.pin_seconds"
    r = client.get("/v1/sanctions/[nope")
    assert r.status_code == 422 and r.json()["field"] == "host"


def test_a_read_token_cannot_feed_scores_or_appeal(settings):
    settings = settings.model_copy(update={"admin_tokens": "auditor:ro-token:read"})
    ro = {"Authorization": "Bearer ro-token"}
    body = {"observations": [{"host": "a.example", "spam_score": 0.99, "observed_at": 1}]}
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/sanctions/scores", json=body, headers=ro).status_code == 403
        r = client.post("/v1/sanctions/a.example/clear", headers=ro, json={"reason": "x"})
        assert r.status_code == 403
        assert client.get("/v1/sanctions/a.example").json()["state"] == "clean"


def observe(client, scope, key, score, at=None):
    at = time.time() if at is None else at
    r = client.post("/v1/sanctions/scores", headers=SPAM, json={"observations": [
        {scope: key, "spam_score": score, "observed_at": at}]})
    assert r.status_code == 200 and r.json()["applied"] == 1, r.text
    return r.json()


def test_the_sample_config_demotes_a_quarantined_domain_s_hosts(client):
    """The shipped config/rules.yaml (the settings fixture's copy) has quarantine_demotion."""
    page = {"documents": [{"id": "a", "url": "https://www.yellow.example/p", "score": 9.0},
                          {"id": "b", "url": "https://ok.example/p", "score": 8.0}]}
    assert [d["id"] for d in client.post("/v1/rerank", json=page).json()["documents"]] == [
        "a", "b"]
    observe(client, "domain", "yellow.example", 0.75)
    out = client.post("/v1/rerank", json=page).json()
    assert [d["id"] for d in out["documents"]] == ["b", "a"]
    [record] = [r for r in out["audit"] if r["rule"] == "quarantine_demotion"]
    assert (record["doc_id"], record["delta"], record["mode"]) == ("a", -3.0, "applied")
    assert "domain yellow.example is in spam quarantine" in record["reason"]


@NO_PAGE
def test_lookup_and_the_host_s_state_report_a_parent_s_quarantine(client):
    observe(client, "domain", "yellow.example", 0.75)
    got = client.get("/v1/banlist/lookup", params={"url": "www.yellow.example"}).json()
    assert (got["banned"], got["quarantined"]) == (False, True)
    [match] = got["quarantine"]
    assert (match["scope"], match["value"], match["actor"], match["applies"]) == (
        "domain", "yellow.example", "antispam", True)
    clean = client.get("/v1/banlist/lookup", params={"url": "ok.example"}).json()
    assert (clean["quarantined"], clean["quarantine"]) == (False, [])
    state = client.get("/v1/sanctions/www.yellow.example").json()
    assert state["state"] == "clean" and state["parents"][0]["state"] == "quarantine"
    assert [(e["sanction"], e["via"]) for e in state["inherited"]] == [
        ("quarantine", "yellow.example")]


@NO_PAGE
def test_clearing_a_host_never_observed_needs_force(client):
    clear = lambda host, **body: client.post(  # noqa: E731
        f"/v1/sanctions/{host}/clear", headers=AUTH, json={"reason": "appeal", **body})
    r = clear("never-seen.example")
    assert r.status_code == 409 and r.json()["field"] == "host"
    assert "has no observation" in r.json()["problem"] and "force" in r.json()["problem"]
    assert client.get("/v1/sanctions/never-seen.example").json()["pinned"] is False
    r = clear("never-seen.example", force=True)
    assert r.status_code == 200 and r.json()["pinned"] is True
    r = clear("never-seen.example", force="yes")
    assert r.status_code == 422 and r.json()["field"] == "body.force"


@NO_PAGE
def test_an_appeal_s_immunity_is_the_setting_unless_permanent(settings):
    settings = settings.model_copy(update={"sanctions_appeal_pin_days": 30.0})
    with TestClient(create_app(settings)) as client:
        observe(client, "host", "shop.example", 0.95)
        clear = lambda **body: client.post(  # noqa: E731
            "/v1/sanctions/shop.example/clear", headers=AUTH, json={"reason": "r", **body})
        got = clear().json()
        assert 30 * 86400 - 60 < got["pinned_until"] - time.time() <= 30 * 86400
        r = clear(permanent=True, pin_seconds=60)
        assert r.status_code == 422 and r.json()["field"] == "body.permanent"
        got = clear(permanent=True).json()
        assert got["pinned_forever"] is True and got["pinned_until"] is None


@NO_PAGE
def test_the_feed_answers_which_observations_a_pin_suppressed(client):
    observe(client, "host", "shop.example", 0.95)
    client.post("/v1/sanctions/shop.example/clear", headers=AUTH, json={"reason": "appeal"})
    out = observe(client, "host", "shop.example", 0.99)
    [held] = out["suppressed"]
    assert (held["index"], held["key"], held["would_be"]) == (0, "shop.example", "banned")
    assert held["until"].endswith("Z") and "tns's appeal" in held["why"]
    assert client.get("/v1/sanctions/shop.example").json()["suppressed"]["would_be"] == "banned"
    text = client.get("/metrics").text
    assert 'rearrange_sanction_suppressed_observations_total{would_be="banned"} 1.0' in text
