"""Sanctions on a real redis-server: decisions taken on one replica reach the other."""
from __future__ import annotations

import json
import threading
import time

import pytest

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


@pytest.mark.python_path("sends no /v1/rerank: feeds and reads state")
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


HOSTS = "rearrange:{sanctions}:hosts"


def bans(prefix, n, score=0.95):
    return [{"host": f"{prefix}{i}.example", "spam_score": score, "observed_at": 1}
            for i in range(n)]


@pytest.mark.python_path("sends no /v1/rerank: feeds and reads Redis")
def test_a_batch_that_runs_redis_out_of_memory_says_item_by_item_what_was_committed(
        redis_server, settings):
    with app_on(redis_server, settings, "a") as a, redis_server.client() as r:
        before = r.info("memory")["used_memory"]
        warm = a.post("/v1/sanctions/scores", headers=SPAM,
                      json={"observations": bans("warm", 100)})
        assert warm.status_code == 200 and warm.json()["applied"] == 100
        per_item = (r.info("memory")["used_memory"] - before) / 100
        # room for some 50 more bans: the batch of 1,000 fails midway (noeviction: Redis
        # refuses writes past maxmemory)
        r.config_set("maxmemory", int(r.info("memory")["used_memory"] + 50 * per_item))
        items = bans("h", 1000)
        answer = a.post("/v1/sanctions/scores", headers=SPAM, json={"observations": items})
        r.config_set("maxmemory", 0)
        assert answer.status_code == 503, answer.text
        out = answer.json()
        assert "nothing was changed" not in out["problem"]
        assert f"{out['applied']} observations before it were applied" in out["problem"]
        applied, not_applied, pending = out["applied"], out["not_applied"], out["pending"]
        assert 0 < applied < 1000 and not_applied and len(pending) <= 1
        assert sorted([*range(applied), *pending, *not_applied]) == list(range(1000))
        assert [t["key"] for t in out["transitions"]] == [
            items[i]["host"] for i in sorted([*range(applied), *pending])]
        states = r.hgetall(HOSTS)
        for i in range(applied):  # committed whole: the state and its ban
            host = items[i]["host"]
            assert json.loads(states[host])["state"] == "banned"
            assert a.get("/v1/sanctions/" + host).json()["ban_entry_id"] is not None
        assert not any(items[i]["host"] in states for i in not_applied)  # nothing of these
        total = a.get("/v1/banlist/entries", params={"limit": 1}).json()["total"]
        assert total in (100 + applied, 100 + applied + len(pending))
        # what the answer says to feed again, fed again: every host banned, once
        again = a.post("/v1/sanctions/scores", headers=SPAM,
                       json={"observations": [items[i] for i in not_applied + pending]})
        assert again.status_code == 200 and again.json()["applied"] == len(not_applied + pending)
        assert a.get("/v1/banlist/entries", params={"limit": 1}).json()["total"] == 1100
        assert all(json.loads(v)["state"] == "banned" for v in r.hvals(HOSTS))


@pytest.mark.python_path("sends no /v1/rerank: feeds and reads Redis")
def test_a_batch_refused_from_its_first_item_says_nothing_was_changed(redis_server, settings):
    with app_on(redis_server, settings, "a") as a, redis_server.client() as r:
        r.config_set("maxmemory", 1)  # below what Redis already uses: every write refused
        answer = a.post("/v1/sanctions/scores", headers=SPAM,
                        json={"observations": bans("h", 10)})
        r.config_set("maxmemory", 0)
        out = answer.json()
        assert answer.status_code == 503 and "nothing was changed" in out["problem"]
        assert "maxmemory" in out["problem"]
        assert (out["applied"], out["pending"], out["not_applied"]) == (0, [], list(range(10)))
        assert r.hlen(HOSTS) == 0


@pytest.mark.python_path("appeals and feeds only: no page is served")
def test_with_redis_an_unobserved_host_is_refused_and_a_forced_pin_reaches_the_other(
        redis_server, settings):
    """The refusal is decided inside the host's WATCH/MULTI update: it writes nothing."""
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        r = a.post("/v1/sanctions/new.example/clear", headers=AUTH, json={"reason": "appeal"})
        assert r.status_code == 409 and r.json()["field"] == "host"
        with redis_server.client() as r_:
            assert r_.hget(HOSTS, "new.example") is None
        r = a.post("/v1/sanctions/new.example/clear", headers=AUTH,
                   json={"reason": "pre-emptive", "force": True})
        assert r.status_code == 200
        assert b.get("/v1/sanctions/new.example").json()["pinned"] is True
        [held] = feed(b, "new.example", 0.95, time.time())["suppressed"]
        assert held["would_be"] == "banned" and held["until"].endswith("Z")
