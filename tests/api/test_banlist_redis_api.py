"""The API of a Redis-backed replica: /readyz and /metrics through a rewind, reseed, adopt."""
from __future__ import annotations

import time

import pytest

from tests.conftest import AUTH, app_on


def until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.01)


def test_a_replica_that_refuses_a_rewind_says_so_and_reseed_repairs(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        for i in range(3):
            assert a.post("/v1/banlist/entries", headers=AUTH,
                          json={"scope": "host", "value": f"h{i}.example",
                                "reason": "r"}).status_code == 201
        ready = a.get("/readyz").json()
        assert ready["banlist_store"] == "redis" and ready["banlist_version"] == 3
        redis_server.restart(empty=True)
        until(lambda: a.get("/readyz").json()["banlist_diverged"] is not None)
        ready = a.get("/readyz")
        assert ready.status_code == 200 and ready.json()["banlist_in_sync"] is False
        assert "restarted empty" in ready.json()["banlist_diverged"]
        metrics = a.get("/metrics").text
        assert "rearrange_banlist_diverged 1.0" in metrics
        assert "rearrange_banlist_backward_refused_total 1.0" in metrics
        assert "rearrange_banlist_in_sync 0.0" in metrics
        page = {"documents": [{"id": "x", "url": "http://h1.example/", "score": 1}]}
        assert a.post("/v1/rerank", json=page).json()["documents"] == []  # still banned
        w = a.post("/v1/banlist/entries", headers=AUTH,
                   json={"scope": "host", "value": "new.example", "reason": "r"})
        assert w.status_code == 503 and "suspended" in w.json()["problem"]
        assert "reseed" in w.json()["problem"] or "restarted empty" in w.json()["problem"]
        r = a.post("/v1/admin/banlist/reseed", headers=AUTH, json={"reason": "redis lost it"})
        assert r.status_code == 200 and r.json()["reseeded"]["entries"] == 3
        until(lambda: a.get("/readyz").json()["banlist_in_sync"])
        assert "rearrange_banlist_diverged 0.0" in a.get("/metrics").text
        with app_on(redis_server, settings, "b") as b:
            assert b.get("/readyz").json()["banlist_entries"] == 3
            history = b.get("/v1/banlist/changes", params={"since": 3}).json()["changes"]
            assert [(c["seq"], c["op"], c["actor"]) for c in history] == [(4, "reseed", "tns")]


@pytest.mark.python_path("sends no /v1/rerank: the admin routes only")
def test_adopt_accepts_an_older_redis_on_operator_request(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        a.post("/v1/banlist/entries", headers=AUTH,
               json={"scope": "host", "value": "h.example", "reason": "r"})
        redis_server.restart(empty=True)
        until(lambda: a.get("/readyz").json()["banlist_diverged"] is not None)
        r = a.post("/v1/admin/banlist/adopt", headers=AUTH, json={"reason": "start over"})
        assert r.status_code == 200 and r.json()["adopted"]["entries"] == 0
        ready = a.get("/readyz").json()
        assert ready["banlist_entries"] == 0 and ready["banlist_diverged"] is None
        assert a.post("/v1/banlist/entries", headers=AUTH,
                      json={"scope": "host", "value": "h.example",
                            "reason": "r"}).json()["banlist_version"] == 1


def test_no_copy_at_all_is_not_ready(redis_server, settings):
    redis_server.kill()
    with app_on(redis_server, settings, "cold") as a:
        ready = a.get("/readyz")
        assert ready.status_code == 503 and ready.json()["banlist_loaded"] is False
        assert ready.json()["banlist_staleness_seconds"] is None
        assert "unreachable" in ready.json()["banlist_problem"]


def every_change(client, **filters) -> dict[int, str]:
    """seq → `at` of every change GET /v1/banlist/changes gives (with `filters`: from the
    history stream; without: from the changelog), a page of 1000 at a time."""
    found: dict[int, str] = {}
    since = 0
    while True:
        r = client.get("/v1/banlist/changes", params={"since": since, "limit": 1000, **filters})
        assert r.status_code == 200, r.text
        found.update((c["seq"], c["at"]) for c in r.json()["changes"])
        if not r.json()["more"]:
            return found
        since = r.json()["changes"][-1]["seq"]


def test_a_change_has_one_time_in_the_changelog_and_in_the_history(redis_server, settings):
    """An import of 3000 lines is one write script and a bulk removal of them a few, each
    running for milliseconds: every change's two records (the changelog's, which GET
    /changes reads, and the history's, which its filters read) say the same time."""
    lines = "".join(f'{{"scope": "host", "value": "h{i}.example", "reason": "spam"}}\n'
                    for i in range(3000))
    with app_on(redis_server, settings, "a") as a:
        r = a.post("/v1/banlist/import", headers=AUTH, content=lines.encode())
        assert r.status_code == 200 and r.json()["imported"] == 3000, r.text
        r = a.post("/v1/banlist/remove", headers=AUTH,
                   json={"filter": {"reason_contains": "spam"}, "reason": "appeal"})
        assert r.status_code == 200 and r.json()["removed"] == 3000, r.text
        logged = every_change(a)
        assert len(logged) == 6000
        assert every_change(a, actor="tns") == logged
