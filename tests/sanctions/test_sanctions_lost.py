"""Redis loses sanction writes and keeps its epoch (restored from an older copy of itself):
each replica writes its own lost writes again (app/sanctions/states.py: the changes stream
and the journal), unless a later write superseded one; a replica that cannot tell which of
its writes were lost refuses Redis's states, marks the loss, and every replica reports the
sanction states not in sync until a reseed. A real redis-server with AOF, restored from a
copy of its files."""
from __future__ import annotations

import json
import re

import pytest

from tests.banlist.redis.test_lost_changes import Backup
from tests.conftest import AUTH, app_on
from tests.helpers import until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.redis
SPAM = {"Authorization": "Bearer spam-token"}


@pytest.fixture
def aof_redis(tmp_path):
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.kill()


def feed(client, host: str, score: float, at: int) -> None:
    r = client.post("/v1/sanctions/scores", headers=SPAM, json={
        "observations": [{"host": host, "spam_score": score, "observed_at": at}]})
    assert r.status_code == 200, r.text


def feed_when_taken(client, host: str, score: float, at: int) -> None:
    """`feed`, sent again while the quarantine list refuses writes as it writes back what
    the restored Redis lost (a 503 asking for the observation again: its own follower, not
    halted here, may be at that step under load), as the scores pipeline does."""
    def taken() -> bool:
        r = client.post("/v1/sanctions/scores", headers=SPAM, json={
            "observations": [{"host": host, "spam_score": score, "observed_at": at}]})
        suspended = r.status_code == 503 and "writes are suspended" in r.text
        assert r.status_code == 200 or suspended, r.text
        return r.status_code == 200
    until(taken)


def held(server, host: str) -> dict | None:
    with server.client() as r:
        raw = r.hget("rearrange:{sanctions}:hosts", host)
    return json.loads(raw) if raw else None


def metric(client, name: str, labels: str) -> float:
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", client.get("/metrics").text,
                      re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_each_replica_writes_back_its_own_sanction_writes_a_restored_redis_lost(
        aof_redis, settings, tmp_path):
    with app_on(aof_redis, settings, "a") as a, app_on(aof_redis, settings, "b") as b:
        feed(a, "grey.example", 0.75, 1)  # quarantined: Redis keeps it
        backup = Backup(aof_redis, tmp_path / "backup")
        feed(a, "grey.example", 0.95, 2)  # lost: grey banned after the backup
        feed(b, "spam.example", 0.95, 2)  # lost: written by the other replica
        assert held(aof_redis, "grey.example")["state"] == "banned"
        backup.restore()  # both writes gone (the replicas may put them back at once)
        until(lambda: (held(aof_redis, "grey.example") or {}).get("state") == "banned"
              and held(aof_redis, "spam.example") is not None)
        assert held(aof_redis, "spam.example")["state"] == "banned"
        for ours in (a, b):
            until(lambda ours=ours: ours.get("/readyz").json()["sanctions_in_sync"])
            assert ours.get("/v1/sanctions/grey.example").json()["state"] == "banned"
        for ours in (a, b):  # each wrote back its own (a feed writes a state once or twice)
            assert metric(ours, "rearrange_redis_recovered_changes_total",
                          '{structure="sanctions"}') >= 1


def test_a_replica_that_cannot_tell_its_lost_writes_refuses_and_the_fleet_waits_for_a_reseed(
        aof_redis, settings, tmp_path):
    with app_on(aof_redis, settings, "a") as a, app_on(aof_redis, settings, "b") as b:
        feed(a, "grey.example", 0.75, 1)
        backup = Backup(aof_redis, tmp_path / "backup")
        feed(a, "grey.example", 0.95, 2)
        states = a.app.state.services.sanctions.states
        states.journal.clear()  # as if its journal had let go of them (JOURNAL writes since)
        states.forgotten = states.own
        backup.restore()
        until(lambda: a.get("/readyz").json()["sanctions_diverged"] is not None)
        body = a.get("/readyz").json()
        assert "cannot be told" in body["sanctions_diverged"]
        assert body["sanctions_in_sync"] is False
        # a write would build on a history missing what this replica holds: refused
        r = a.post("/v1/sanctions/scores", headers=SPAM, json={
            "observations": [{"host": "other.example", "spam_score": 0.95, "observed_at": 3}]})
        assert r.status_code == 503
        # the other replica, and one started now, report the loss while it is marked
        with app_on(aof_redis, settings, "c") as c:
            for other in (b, c):
                until(lambda other=other: other.get("/readyz").json()["sanctions_missing"])
                assert "reseed" in other.get("/readyz").json()["sanctions_missing"]
            r = a.post("/v1/admin/sanctions/reseed", headers=AUTH,
                       json={"reason": "redis restored from an old backup"})
            assert r.status_code == 200, r.text
            assert held(aof_redis, "grey.example")["state"] == "banned"
            for ours in (a, b, c):
                until(lambda ours=ours: ours.get("/readyz").json()["sanctions_in_sync"])
                assert ours.get("/v1/sanctions/grey.example").json()["state"] == "banned"


def test_a_write_made_before_the_next_round_does_not_hide_a_loss(aof_redis, settings, tmp_path):
    with app_on(aof_redis, settings, "a") as a:
        states = a.app.state.services.sanctions.states
        feed(a, "grey.example", 0.75, 1)
        backup = Backup(aof_redis, tmp_path / "backup")
        feed(a, "grey.example", 0.95, 2)  # lost below
        states.halt()  # rounds by hand from here: the write below lands before the next one
        states.round(block=False)
        backup.restore()
        feed_when_taken(a, "fresh.example", 0.75, 3)  # a newer record than the lost one
        assert held(aof_redis, "grey.example")["state"] == "quarantine"
        states.round(block=False)
        assert held(aof_redis, "grey.example")["state"] == "banned"
        assert held(aof_redis, "fresh.example")["state"] == "quarantine"
