"""The sanctions API end to end: feed with a write token, quarantine demotes, ban removes."""
from __future__ import annotations

from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import AUTH

SPAM = {"Authorization": "Bearer spam-token"}
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
