"""A Sentinel-managed Redis (a primary, a replica, three Sentinels, all real) under the
failures the fleet must survive: replication cut while bans are written, the primary
killed and the replica promoted, the old primary back with its own data. Every
acknowledged ban is checked on every replica of ours, on Redis, and on a replica of ours
started after the failover."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from tests.conftest import AUTH, app_on
from tests.helpers import until
from tests.redis_sentinel import SentinelSet

pytestmark = pytest.mark.redis


@pytest.fixture
def sentinels(tmp_path: Path):
    cluster = SentinelSet(tmp_path / "redis")
    yield cluster
    cluster.close()


def ban(client: TestClient, host: str):
    return client.post("/v1/banlist/entries", headers=AUTH,
                       json={"scope": "domain", "value": host, "reason": "legal removal"})


def banned(client: TestClient, host: str) -> bool:
    return client.get("/v1/banlist/lookup", params={"url": f"https://{host}/"}).json()["banned"]


def held_by_redis(server) -> set[str]:  # type: ignore[no-untyped-def]
    with server.client() as c:
        return {orjson.loads(v)["value"] for v in c.hgetall("rearrange:{banlist}:entries").values()}


def in_sync(client: TestClient) -> bool:
    return bool(client.get("/readyz").json()["banlist_in_sync"])


def test_no_acknowledged_ban_is_lost_through_a_cut_a_failover_and_the_old_primary_back(
        sentinels, settings):
    with app_on(sentinels, settings, "a") as a, app_on(sentinels, settings, "b") as b:
        durable = [f"kept-{n}.example" for n in range(5)]
        for host in durable:
            r = ban(a, host)
            assert r.status_code == 201, r.text
        sentinels.cut()  # the replica lags from now on
        unconfirmed = [f"lagging-{n}.example" for n in range(5)]
        for host in unconfirmed:
            r = ban(a, host)
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "not_durable"
            assert r.json()["replicas_required"] == 1
        promoted = sentinels.fail_over()
        assert set(durable) <= held_by_redis(promoted)  # confirmed by the promoted replica
        # the unconfirmed ones were lost with the primary; our replicas held them, and
        # write them again (recovery.py) rather than refuse Redis or drop them
        until(lambda: set(durable + unconfirmed) <= held_by_redis(promoted), 15)
        for ours in (a, b):
            until(lambda ours=ours: in_sync(ours), 15)
            assert all(banned(ours, host) for host in durable + unconfirmed)
            ready = ours.get("/readyz")
            assert ready.status_code == 200 and ready.json()["banlist_missing"] is None

        # the old primary is down: Sentinel still lists it as the new primary's replica, so
        # a write cannot be confirmed and is refused as not durable, not answered 2xx
        r = ban(a, "during.example")
        assert r.status_code == 503 and r.json()["error"] == "not_durable"
        sentinels.primary.start()  # with its own data (the five unconfirmed bans)
        sentinels.rejoin(sentinels.primary, promoted)
        sentinels.wait_until(lambda: sentinels.connected_replicas(promoted) == 1,
                             "the old primary to rejoin as a replica", 30)
        r = ban(a, "after.example")
        assert r.status_code == 201, r.text
        everything = set(durable + unconfirmed) | {"during.example", "after.example"}
        sentinels.wait_until(lambda: held_by_redis(sentinels.primary) == everything,
                             "the old primary to hold the new primary's data")
        with app_on(sentinels, settings, "late") as late:
            assert in_sync(late)
            assert all(banned(late, host) for host in everything)
