"""Redis restarted empty under the sanctions: the quarantine list and the host states are
refused like the banlist, reported by /readyz and /metrics, and repaired by reseed or adopt
(a real redis-server, restarted without its data)."""
from __future__ import annotations

import re
import time

from tests.conftest import AUTH
from tests.conftest import app_on as replica_app

SPAM = {"Authorization": "Bearer spam-token"}
STRUCTURES = ("banlist", "quarantine", "sanctions")


def app_on(redis_server, settings, name):
    # the housekeeping loop checks the sanction states every poll, as deployed
    return replica_app(redis_server, settings.model_copy(update={"config_poll_seconds": 0.1}),
                       name)


def until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def feed(client, host, score, at):
    return client.post("/v1/sanctions/scores", headers=SPAM, json={
        "observations": [{"host": host, "spam_score": score, "observed_at": at}]})


def metric(client, name: str, labels: str) -> float:
    text = client.get("/metrics").text
    return float(re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.MULTILINE).group(1))


def sanction_some_hosts(client):
    assert feed(client, "grey.example", 0.75, 1).status_code == 200  # quarantine
    assert feed(client, "bad.example", 0.95, 1).status_code == 200  # banned
    assert feed(client, "appealed.example", 0.95, 1).status_code == 200
    assert client.post("/v1/sanctions/appealed.example/clear", headers=AUTH,
                       json={"reason": "owner fixed it"}).status_code == 200  # pinned clean


def lose_redis(redis_server, client):
    redis_server.restart(empty=True)
    until(lambda: all(client.get("/readyz").json()[f"{s}_diverged"] for s in STRUCTURES))


def test_a_redis_that_lost_everything_is_refused_for_every_structure_and_reseed_repairs(
        redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        sanction_some_hosts(a)
        lose_redis(redis_server, a)
        ready = a.get("/readyz")
        assert ready.status_code == 200  # still serving its copies
        body = ready.json()
        for structure in STRUCTURES:
            assert "restarted empty" in body[f"{structure}_diverged"]
            assert body[f"{structure}_in_sync"] is False
            assert metric(a, "rearrange_redis_diverged", f'{{structure="{structure}"}}') == 1
            assert metric(a, "rearrange_redis_refusals_total",
                          f'{{cause="lost",structure="{structure}"}}') == 1
        refused = feed(a, "new.example", 0.95, 2)
        assert refused.status_code == 503 and "suspended" in refused.json()["problem"]
        # reads answer from the copy this replica holds
        assert a.get("/v1/sanctions/grey.example").json()["state"] == "quarantine"
        assert a.get("/v1/sanctions/appealed.example").json()["pinned"] is True

        for structure in STRUCTURES:
            r = a.post(f"/v1/admin/{structure}/reseed", headers=AUTH,
                       json={"reason": "redis lost its data"})
            assert r.status_code == 200, r.text
        assert a.post("/v1/admin/sanctions/reseed", headers=AUTH,
                      json={"reason": "again"}).status_code == 409  # nothing left to repair
        until(lambda: all(a.get("/readyz").json()[f"{s}_in_sync"] for s in STRUCTURES))
        for structure in STRUCTURES:
            assert metric(a, "rearrange_redis_diverged", f'{{structure="{structure}"}}') == 0
        with replica_app(redis_server, settings, "b") as b:  # a new pod reads what came back
            assert b.get("/v1/sanctions/appealed.example").json()["pinned"] is True
            assert b.get("/readyz").json()["quarantine_entries"] == 1
            assert feed(b, "appealed.example", 0.99, 3).json()["transitions"] == []  # pin held
            moved = feed(b, "grey.example", 0.95, 3).json()["transitions"]
            assert [(t["from"], t["to"]) for t in moved] == [("quarantine", "banned")]
        history = a.get("/v1/sanctions/grey.example").json()["history"]
        assert [h["to"] for h in history] == ["quarantine", "banned"]


def test_adopt_accepts_what_redis_holds_for_the_quarantine_and_the_sanction_states(
        redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        sanction_some_hosts(a)
        lose_redis(redis_server, a)
        assert a.post("/v1/admin/banlist/reseed", headers=AUTH,
                      json={"reason": "keep the bans"}).status_code == 200
        for structure in ("quarantine", "sanctions"):
            r = a.post(f"/v1/admin/{structure}/adopt", headers=AUTH,
                       json={"reason": "start the sanctions over"})
            assert r.status_code == 200, r.text
        assert a.post("/v1/admin/sanctions/adopt", headers=AUTH,
                      json={"reason": "x"}).json()["adopted"] == {"epoch": None, "hosts": 0}
        until(lambda: all(a.get("/readyz").json()[f"{s}_in_sync"] for s in STRUCTURES))
        body = a.get("/readyz").json()
        assert body["quarantine_entries"] == 0 and body["sanctions_hosts"] == 0
        assert a.get("/v1/sanctions/grey.example").json()["state"] == "clean"
        assert feed(a, "grey.example", 0.75, 2).status_code == 200  # writes work again
        assert a.get("/readyz").json()["quarantine_entries"] == 1


def test_an_unknown_structure_is_refused_by_name(redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        r = a.post("/v1/admin/experiments/reseed", headers=AUTH, json={"reason": "r"})
        assert r.status_code == 422 and r.json()["field"] == "path.structure"


def test_a_forced_reseed_of_the_states_is_followed_by_the_replicas_of_the_newer_history(
        redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        sanction_some_hosts(a)
        lose_redis(redis_server, a)
        with app_on(redis_server, settings, "b") as b:  # a new pod takes what Redis holds
            assert feed(b, "new.example", 0.5, 2).status_code == 200  # a new states history
            until(lambda: "another sanction-state history" in (
                a.get("/readyz").json()["sanctions_diverged"] or ""))
            assert b.get("/readyz").json()["sanctions_diverged"] is None
            r = a.post("/v1/admin/sanctions/reseed", headers=AUTH, json={"reason": "keep a's"})
            assert r.status_code == 409 and r.json()["field"] == "force"
            r = a.post("/v1/admin/sanctions/reseed", headers=AUTH,
                       json={"reason": "keep a's", "force": True})
            assert r.status_code == 200 and r.json()["reseeded"]["hosts"] == 3
            until(lambda: a.get("/readyz").json()["sanctions_in_sync"])
            assert b.get("/v1/sanctions/grey.example").json()["state"] == "quarantine"
            until(lambda: b.get("/readyz").json()["sanctions_epoch"]
                  == a.get("/readyz").json()["sanctions_epoch"])
            assert b.get("/readyz").json()["sanctions_diverged"] is None
            assert b.get("/v1/sanctions/new.example").json()["observed_at"] is None  # replaced
