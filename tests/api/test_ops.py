"""Health, readiness, metrics and config reload through the API."""
from __future__ import annotations

from app import __version__
from tests.conftest import AUTH


def test_health_and_ready(client):
    assert client.get("/healthz").json() == {"status": "ok", "version": __version__}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert ready.json()["config_version"] == client.app.state.services.config.engine.version


def test_metrics_count_rule_actions_and_latency(client):
    page = {"documents": [{"id": "a", "url": "http://x.com/1", "score": 2, "spam_score": 0.99},
                          {"id": "b", "url": "http://y.com/1", "score": 1, "is_ad": True}]}
    client.post("/v1/rerank", json=page)
    text = client.get("/metrics").text
    assert ('rearrange_rule_actions_total{action="remove",mode="applied",phase="pre-filter",'
            'profile="default",rule="spam_ban"} 1.0') in text
    assert ('rearrange_rule_actions_total{action="annotate",mode="applied",phase="annotate",'
            'profile="default",rule="ad_label"} 1.0') in text
    assert 'rearrange_request_duration_seconds_count{profile="default"} 1.0' in text
    assert ('rearrange_rule_duration_seconds_count{mode="shadow",phase="rerank",'
            'rule="spam_demotion"}') in text
    client.post("/v1/rerank", json={"documents": [{"id": "a"}]})
    assert 'rearrange_requests_total{outcome="invalid",profile=""} 1.0' in client.get(
        "/metrics").text


def test_reload_endpoint_swaps_and_refuses_bad_config(client, settings):
    before = client.post("/v1/rerank", json={"documents": []}).json()["config_version"]
    assert client.post("/v1/admin/config/reload").status_code == 401
    settings.config.write_text("profiles: {default: {trim: [{depth: {k: 1}}]}}")
    r = client.post("/v1/admin/config/reload", headers=AUTH)
    assert r.status_code == 200 and r.json()["changed"] is True
    after = r.json()["config_version"]
    assert after != before
    page = {"documents": [{"id": "a", "url": "http://x.com/1", "score": 2},
                          {"id": "b", "url": "http://y.com/1", "score": 1}]}
    out = client.post("/v1/rerank", json=page).json()
    assert out["config_version"] == after and len(out["documents"]) == 1
    settings.config.write_text("profiles: {default: {trim: [{depth: {k: -1}}]}}")
    r = client.post("/v1/admin/config/reload", headers=AUTH)
    assert r.status_code == 422
    assert r.json()["field"] == "profiles.default.trim[0] depth" and r.json()["serving"] == after
    assert client.post("/v1/rerank", json=page).json()["config_version"] == after
    assert 'rearrange_config_reloads_total{result="refused"} 1.0' in client.get("/metrics").text


def test_every_route_caps_its_body_before_auth_or_parsing(client):
    limit = client.app.state.services.settings.max_body_bytes
    big = b'{"scope": "host", "value": "a.com", "reason": "' + b"x" * limit + b'"}'
    for path in ("/v1/banlist/entries", "/v1/sanctions/scores", "/v1/banlist/import"):
        r = client.post(path, content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413, (path, r.status_code, r.text[:200])
        assert r.json()["field"] == "body" and "over the limit" in r.json()["problem"]

    def chunks():  # a streamed body, no Content-Length: counted as it arrives
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536

    r = client.post("/v1/banlist/entries", content=chunks(),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "body"
