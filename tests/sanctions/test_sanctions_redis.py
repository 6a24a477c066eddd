"""Sanctions on a real redis-server: decisions taken on one replica reach the other."""
from __future__ import annotations

import threading
import time

from tests.conftest import AUTH
from tests.conftest import app_on as replica_app

SPAM = {"Authorization": "Bearer spam-token"}
RULES = """profiles:
  default:
    pre-filter: [banlist]
    rerank: [{quarantine_demotion: {penalty: 3}}]
    post-filter: [empty_result_fallback]
"""
PAGE = {"documents": [{"id": "a", "url": "http://grey.example/1", "score": 9.0},
                      {"id": "b", "url": "http://ok.example/1", "score": 8.0}]}


def app_on(redis_server, settings, name):
    settings.config.write_text(RULES)
    return replica_app(redis_server, settings, name)


def until(cond, timeout=5.0):
    started = time.monotonic()
    while not cond():
        assert time.monotonic() - started < timeout, "not within the timeout"
        time.sleep(0.01)
    return time.monotonic() - started


def order(client):
    return [d["id"] for d in client.post("/v1/rerank", json=PAGE).json()["documents"]]


def feed(client, host, score, at):
    return client.post("/v1/sanctions/scores", headers=SPAM, json={
        "observations": [{"host": host, "spam_score": score, "observed_at": at}]}).json()


def test_quarantine_and_ban_decided_on_one_replica_apply_on_the_other(redis_server, settings):
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        assert order(b) == ["a", "b"]
        feed(a, "grey.example", 0.75, 1)  # quarantine: demoted everywhere
        assert until(lambda: order(b) == ["b", "a"]) < 1.0
        feed(b, "grey.example", 0.95, 2)  # banned, fed through the *other* replica
        assert until(lambda: order(a) == ["b"]) < 1.0
        removed = a.post("/v1/rerank", json=PAGE).json()["removed"][0]
        assert removed["rule"] == "banlist" and "spam_score 0.95" in removed["reason"]
        history = b.get("/v1/sanctions/grey.example").json()["history"]
        assert [h["to"] for h in history] == ["quarantine", "banned"]
        assert feed(a, "grey.example", 0.99, 1.5)["stale"] == 1  # older than the last applied
        b.post("/v1/sanctions/grey.example/clear", headers=AUTH, json={"reason": "appeal"})
        assert until(lambda: order(a) == ["a", "b"]) < 1.0
        changes = a.get("/v1/banlist/changes").json()["changes"]
        assert [(c["op"], c["actor"]) for c in changes] == [("add", "antispam"),
                                                             ("remove", "tns")]


def test_concurrent_feeds_of_one_host_lose_no_observation(redis_server, settings):
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        def run(client, start):
            for at in range(start, start + 40, 2):
                feed(client, "race.example", 0.1, at)

        threads = [threading.Thread(target=run, args=(a, 1)),
                   threading.Thread(target=run, args=(b, 2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        state = a.get("/v1/sanctions/race.example").json()
        assert state["observed_at"] == 40  # the newest of both writers, whichever came last


def test_with_redis_down_an_appeal_fails_loudly_and_the_ban_stays(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        feed(a, "down.example", 0.95, 1)
        page = {"documents": [{"id": "x", "url": "http://down.example/", "score": 1.0}]}
        assert a.post("/v1/rerank", json=page).json()["documents"] == []
        redis_server.kill()
        r = a.post("/v1/sanctions/down.example/clear", headers=AUTH, json={"reason": "appeal"})
        assert r.status_code == 503 and r.json()["problem"]
        assert a.post("/v1/rerank", json=page).json()["documents"] == []  # still banned
