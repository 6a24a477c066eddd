"""Four eyes on high-impact bans (app/banlist/review.py): real /v1/rerank traffic makes a
ban's impact, a ban over REARRANGE_BAN_REVIEW_SHARE waits for a second person."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import app_on
from tests.helpers import until

TOKENS = ("alice:alice-token:write,bob:bob-token:approve,carol:carol-token:approve,"
          "reader:read-token:read")
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
CAROL = {"Authorization": "Bearer carol-token"}


def serve(client: TestClient, hosts_per_page: list[list[str]]) -> None:
    """Send one /v1/rerank request per page, each page's documents on those hosts."""
    for n, hosts in enumerate(hosts_per_page):
        docs = [{"id": f"d{i}", "url": f"https://{h}/page{n}", "score": 10.0 - i}
                for i, h in enumerate(hosts)]
        r = client.post("/v1/rerank", json={"query": {"text": "q"}, "documents": docs})
        assert r.status_code == 200, r.text


# 200 requests: news.big.example on 150 of them (75 %), tiny.example on 1 (0.5 %), the rest
# on filler hosts; a share of 0.01 sends big.example's bans to review, not tiny.example's
TRAFFIC = ([["news.big.example", f"f{i}.filler.example"] for i in range(150)]
           + [["tiny.example", "f0.filler.example"]]
           + [[f"g{i}.filler.example"] for i in range(49)])


@pytest.fixture
def review_settings(settings):
    return settings.model_copy(update={"admin_tokens": TOKENS, "ban_review_share": 0.01})


def test_a_high_impact_ban_waits_for_a_second_person(review_settings):
    with TestClient(create_app(review_settings)) as client:
        serve(client, TRAFFIC)
        page = {"query": {"text": "q"},
                "documents": [{"id": "a", "url": "https://news.big.example/x", "score": 2}]}
        # a small site is banned at once, its impact shown
        small = client.post("/v1/banlist/entries", headers=ALICE, json={
            "scope": "domain", "value": "tiny.example", "reason": "spam"})
        assert small.status_code == 201, small.text
        assert small.json()["impact"] == {"share": 1 / 200, "served": 1, "requests": 200,
                                          "keys": ["tiny.example"]}
        version = small.json()["banlist_version"]
        # the typo: the whole big site
        big = client.post("/v1/banlist/entries", headers=ALICE, json={
            "scope": "domain", "value": "big.example", "reason": "typo of bigg.example"})
        assert big.status_code == 202, big.text
        body = big.json()
        assert body["status"] == "pending_review" and body["share"] == 150 / 200
        assert body["banlist_version"] == version  # nothing banned
        pending_id = body["pending"]["id"]
        assert client.post("/v1/rerank", json=page).json()["documents"][0]["id"] == "a"
        # asked again: the same pending ban, nothing new
        again = client.post("/v1/banlist/entries", headers=ALICE, json={
            "scope": "domain", "value": "big.example", "reason": "typo of bigg.example"})
        assert again.status_code == 202 and again.json()["existing"] is True
        assert again.json()["pending"]["id"] == pending_id
        # the queue, and lookup, show it
        queue = client.get("/v1/banlist/pending").json()["pending"]
        assert [(p["id"], p["actor"], p["in_effect"]) for p in queue] == [
            (pending_id, "alice", False)]
        look = client.get("/v1/banlist/lookup",
                          params={"url": "https://news.big.example/x"}).json()
        assert look["banned"] is False
        assert [p["id"] for p in look["pending"]] == [pending_id]
        # the proposer cannot approve (even holding the right), a write token cannot either
        self_approve = client.post(f"/v1/banlist/pending/{pending_id}/approve",
                                   headers={"Authorization": "Bearer alice-token"},
                                   json={"reason": "mine"})
        assert self_approve.status_code == 403
        # a second person with the right approves: the ban takes effect, alice its actor
        ok = client.post(f"/v1/banlist/pending/{pending_id}/approve", headers=BOB,
                         json={"reason": "checked the ticket"})
        assert ok.status_code == 200, ok.text
        assert ok.json()["entry"]["actor"] == "alice" and ok.json()["by"] == "bob"
        assert client.post("/v1/rerank", json=page).json()["documents"] == []
        assert client.get("/v1/banlist/pending").json()["pending"] == []
        gone = client.post(f"/v1/banlist/pending/{pending_id}/approve", headers=CAROL,
                           json={"reason": "twice"})
        assert gone.status_code == 404
        metrics = client.get("/metrics").text
        assert 'rearrange_ban_reviews_total{outcome="pending"} 1.0' in metrics
        assert 'rearrange_ban_reviews_total{outcome="approved"} 1.0' in metrics


@pytest.mark.python_path("the traffic counted on both paths is the first test's concern")
def test_the_same_actor_approving_is_refused(review_settings):
    with TestClient(create_app(review_settings)) as client:
        serve(client, TRAFFIC[:10])
        proposed = client.post("/v1/banlist/entries", headers=BOB, json={
            "scope": "host", "value": "news.big.example", "reason": "phishing"})
        assert proposed.status_code == 202
        pending_id = proposed.json()["pending"]["id"]
        r = client.post(f"/v1/banlist/pending/{pending_id}/approve", headers=BOB,
                        json={"reason": "looks right to me"})
        assert r.status_code == 403 and r.json()["field"] == "id"
        assert "second person" in r.json()["problem"]
        # a write token may not approve at all
        r = client.post(f"/v1/banlist/pending/{pending_id}/approve", headers=ALICE,
                        json={"reason": "x"})
        assert r.status_code == 403
        # another's pending ban is rejected only with the right to approve; its proposer
        # may withdraw it
        r = client.post(f"/v1/banlist/pending/{pending_id}/reject", headers=ALICE,
                        json={"reason": "x"})
        assert r.status_code == 403
        r = client.post(f"/v1/banlist/pending/{pending_id}/reject", headers=BOB,
                        json={"reason": "withdrawn: wrong host"})
        assert r.status_code == 200 and r.json()["lifted"] == []
        assert client.get("/v1/banlist/pending").json()["pending"] == []


@pytest.mark.python_path("the traffic counted on both paths is the first test's concern")
def test_an_urgent_ban_is_at_once_and_reviewed_after(review_settings):
    with TestClient(create_app(review_settings)) as client:
        serve(client, TRAFFIC[:20])
        page = {"query": {"text": "q"},
                "documents": [{"id": "a", "url": "https://news.big.example/x", "score": 2}]}
        # urgent needs the right to approve
        r = client.post("/v1/banlist/entries", headers=ALICE, json={
            "scope": "domain", "value": "big.example", "reason": "malware", "urgent": True})
        assert r.status_code == 403 and r.json()["field"] == "urgent"
        r = client.post("/v1/banlist/entries", headers=BOB, json={
            "scope": "domain", "value": "big.example", "reason": "malware", "urgent": True})
        assert r.status_code == 201, r.text
        assert r.json()["review"]["status"] == "pending_review"
        pending_id = r.json()["review"]["pending"]["id"]
        assert client.post("/v1/rerank", json=page).json()["documents"] == []
        queue = client.get("/v1/banlist/pending").json()["pending"]
        assert [(p["id"], p["in_effect"]) for p in queue] == [(pending_id, True)]
        # rejected on review: the ban is lifted
        r = client.post(f"/v1/banlist/pending/{pending_id}/reject", headers=CAROL,
                        json={"reason": "false positive"})
        assert r.status_code == 200, r.text
        assert [e["value"] for e in r.json()["lifted"]] == ["big.example"]
        assert client.post("/v1/rerank", json=page).json()["documents"][0]["id"] == "a"
        changes = client.get("/v1/banlist/changes").json()["changes"]
        assert changes[-1]["op"] == "remove" and changes[-1]["actor"] == "carol"
        assert changes[-1]["reason"] == "rejected on review: false positive"


@pytest.mark.python_path("the traffic counted on both paths is the first test's concern")
def test_url_bans_are_not_weighed(review_settings):
    with TestClient(create_app(review_settings)) as client:
        serve(client, TRAFFIC[:20])
        r = client.post("/v1/banlist/entries", headers=ALICE, json={
            "scope": "url", "value": "https://news.big.example/page3", "reason": "dmca"})
        assert r.status_code == 201 and r.json()["impact"]["share"] is None


@pytest.mark.redis
@pytest.mark.python_path("the traffic counted on both paths is the first test's concern")
def test_pending_bans_reach_every_replica(review_settings, redis_server):
    with (app_on(redis_server, review_settings, "a") as a,
          app_on(redis_server, review_settings, "b") as b):
        serve(a, TRAFFIC[:20])
        proposed = a.post("/v1/banlist/entries", headers=ALICE, json={
            "scope": "domain", "value": "big.example", "reason": "spam network"})
        assert proposed.status_code == 202
        pending_id = proposed.json()["pending"]["id"]
        until(lambda: b.get("/v1/banlist/pending").json()["pending"])
        # approved on the other replica: the ban reaches the first
        ok = b.post(f"/v1/banlist/pending/{pending_id}/approve", headers=BOB,
                    json={"reason": "confirmed"})
        assert ok.status_code == 200, ok.text
        until(lambda: a.get("/v1/banlist/lookup",
                            params={"url": "https://news.big.example/"}).json()["banned"])
        until(lambda: a.get("/v1/banlist/pending").json()["pending"] == [])


@pytest.mark.python_path("the traffic counted on both paths is the first test's concern")
def test_an_import_does_not_pass_by_the_review(review_settings):
    lines = (b'{"scope": "domain", "value": "tiny.example", "reason": "spam"}\n'
             b'{"scope": "domain", "value": "big.example", "reason": "spam"}\n')
    with TestClient(create_app(review_settings)) as client:
        serve(client, TRAFFIC)
        r = client.post("/v1/banlist/import", headers=ALICE, content=lines)
        assert r.status_code == 422, r.text
        assert [(x["line"], x["field"]) for x in r.json()["refused"]] == [(2, "value")]
        assert "75.00% of the last hour's requests" in r.json()["refused"][0]["problem"]
        r = client.post("/v1/banlist/import?mode=valid", headers=ALICE, content=lines)
        assert r.json()["imported"] == 1
        # a token that may approve imports it
        r = client.post("/v1/banlist/import", headers=BOB, content=lines)
        assert r.status_code == 200 and r.json()["imported"] == 1, r.text
