"""Redis loses changes our replicas hold (app/banlist/redis/recovery.py): a Redis restored
from an older copy of itself, acknowledged bans included. Replicas that can tell exactly
what was lost write it again; one that cannot (restarted since, its journal empty) marks
the loss in Redis, every replica following Redis reports not ready until a reseed, and
the reseed brings everything back."""
from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from app.banlist.redis import recovery
from tests.conftest import AUTH, app_on
from tests.helpers import until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.redis


def ban(client: TestClient, host: str) -> None:
    r = client.post("/v1/banlist/entries", headers=AUTH,
                    json={"scope": "domain", "value": host, "reason": "court order"})
    assert r.status_code == 201, r.text


def unban(client: TestClient, host: str) -> None:
    entry = client.get("/v1/banlist/lookup", params={"url": f"https://{host}/"}).json()
    r = client.request("DELETE", f"/v1/banlist/entries/{entry['matches'][0]['id']}",
                       headers=AUTH, json={"reason": "appeal granted"})
    assert r.status_code == 200, r.text


def banned(client: TestClient, host: str) -> bool:
    return client.get("/v1/banlist/lookup", params={"url": f"https://{host}/"}).json()["banned"]



class Backup:
    """A copy of a Redis's append-only files, taken while it is paused (a consistent cut)."""

    def __init__(self, server: RedisServer, where: Path) -> None:
        self.server, self.where = server, where
        server.pause()
        try:
            shutil.copytree(server.dir / "appendonlydir", where)
        finally:
            server.resume()

    def restore(self) -> None:
        """The Redis killed, its files replaced by the copy, started again."""
        self.server.kill()
        shutil.rmtree(self.server.dir / "appendonlydir")
        shutil.copytree(self.where, self.server.dir / "appendonlydir")
        self.server.start()


@pytest.fixture
def aof_redis(tmp_path: Path):
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.kill()


HOSTS = [f"site-{n}.example" for n in range(6)]


def settled(ready: dict) -> bool:
    return bool(ready["banlist_in_sync"]) and ready["banlist_missing"] is None


def both_settled_past(before: str, *replicas: TestClient) -> bool:
    ready = [r.get("/readyz").json() for r in replicas]
    positions = {doc["banlist_stream_id"] for doc in ready}
    return all(settled(doc) for doc in ready) and len(positions) == 1 and before not in positions


QUIET = 2.5  # seconds: over two replication rounds (a tailing read blocks up to 1 s)


class Steadily:
    """True once `cond` has held at every look for QUIET seconds: each replica has had a
    round since, so one that had not yet seen Redis move (and would then mark a loss of
    its own) has had its chance to."""

    def __init__(self, cond: Callable[[], bool]) -> None:
        self.cond, self.since = cond, None

    def __call__(self) -> bool:
        if not self.cond():
            self.since = None
            return False
        now = time.monotonic()
        self.since = self.since or now
        return now - self.since >= QUIET


def test_replicas_write_back_what_a_restored_redis_lost(aof_redis, settings, tmp_path):
    with app_on(aof_redis, settings, "a") as a, app_on(aof_redis, settings, "b") as b:
        for host in HOSTS[:3]:
            ban(a, host)
        backup = Backup(aof_redis, tmp_path / "backup")
        for host in HOSTS[3:]:
            ban(b, host)  # acknowledged: Redis has no replica, so it answers alone
        unban(a, HOSTS[0])  # a removal Redis will lose too
        before = a.get("/readyz").json()["banlist_stream_id"]
        backup.restore()
        # in sync and nothing missing on both, in the same look and at one stream position
        # written after the restore, and staying so: a replica that has not seen the restore
        # yet still says it is in sync, and one that has written back may look settled
        # before the other marks what it holds
        until(Steadily(lambda: both_settled_past(before, a, b)), 20)
        for ours in (a, b):
            assert not banned(ours, HOSTS[0])
            assert all(banned(ours, host) for host in HOSTS[1:])
            assert ours.get("/readyz").json()["banlist_missing"] is None
        with app_on(aof_redis, settings, "late") as late:
            assert late.get("/readyz").status_code == 200
            assert not banned(late, HOSTS[0])
            assert all(banned(late, host) for host in HOSTS[1:])
        recovered = a.get("/metrics").text + b.get("/metrics").text
        assert 'rearrange_redis_recoveries_total{result="reapplied",structure="banlist"} 1.0' \
            in recovered


def lose_three_behind_a_restart(aof_redis, settings, tmp_path: Path) -> None:
    """Replica `a` bans six hosts, Redis is restored to a copy taken after three, and `a`
    is stopped: started again, its snapshot holds all six and its journal nothing."""
    with app_on(aof_redis, settings, "a") as a:
        for host in HOSTS[:3]:
            ban(a, host)
        backup = Backup(aof_redis, tmp_path / "backup")
        for host in HOSTS[3:]:
            ban(a, host)
    backup.restore()


def test_a_loss_no_replica_can_tell_keeps_followers_unready_until_a_reseed(
        aof_redis, settings, tmp_path):
    lose_three_behind_a_restart(aof_redis, settings, tmp_path)
    with app_on(aof_redis, settings, "a") as a:
        assert "went backwards" in a.get("/readyz").json()["banlist_diverged"]
        assert a.get("/readyz").status_code == 200  # it serves the whole copy it holds
        assert all(banned(a, host) for host in HOSTS)
        with app_on(aof_redis, settings, "late") as late:
            until(lambda: late.get("/readyz").status_code == 503)
            ready = late.get("/readyz").json()
            assert ready["ready"] is False and ready["banlist_in_sync"] is False
            assert "holds seq 6" in ready["banlist_missing"]
            assert "rearrange banlist reseed" in ready["banlist_missing"]
            r = a.post("/v1/admin/banlist/reseed", headers=AUTH,
                       json={"reason": "restored Redis lost three court orders"})
            assert r.status_code == 200, r.text
            until(lambda: late.get("/readyz").status_code == 200)
            assert all(banned(late, host) for host in HOSTS)


def test_the_mark_of_a_replica_gone_for_good_is_forgotten_by_an_operator(
        aof_redis, settings, tmp_path, monkeypatch):
    lose_three_behind_a_restart(aof_redis, settings, tmp_path)
    with app_on(aof_redis, settings, "a") as a:  # marks the loss it cannot tell, then dies
        until(lambda: a.get("/readyz").json()["banlist_diverged"] is not None)
    monkeypatch.setattr("app.banlist.redis.recovery.STALE_MARK", 0.0)  # no minute's wait
    with app_on(aof_redis, settings, "late") as late:
        # the mark is no longer rewritten: unchanged since `late` first read it
        until(lambda: "not refreshed for" in (late.get("/readyz").json()["banlist_missing"]
                                              or ""))
        missing = late.get("/readyz").json()["banlist_missing"]
        assert "forget-loss" in missing
        (name,) = aof_redis.client().hkeys("rearrange:{banlist}:lost")
        assert name in missing
        gone = late.request("DELETE", f"/v1/admin/banlist/lost/{name}", headers=AUTH,
                            json={"reason": "replica a was decommissioned"})
        assert gone.status_code == 200, gone.text
        assert gone.json()["forgotten"]["seq"] == 6
        until(lambda: late.get("/readyz").status_code == 200)
        assert not any(banned(late, host) for host in HOSTS[3:])  # accepted as lost
        again = late.request("DELETE", f"/v1/admin/banlist/lost/{name}", headers=AUTH,
                             json={"reason": "twice"})
        assert again.status_code == 404 and again.json()["field"] == "replica"


def test_a_mark_is_stale_when_unchanged_here_whatever_its_holders_clock_says():
    clock = [100.0]
    watch = recovery.MarkWatch(lambda: clock[0])
    # a holder whose clock runs ahead: its `at` is in this host's future, and refreshed
    live = {"h/1/banlist/a": '{"seq": 6, "at": "2099-01-01T00:00:00.000Z", "why": "x"}'}
    watch.saw(live)
    clock[0] += 90
    watch.saw({"h/1/banlist/a": live["h/1/banlist/a"].replace("00.000Z", "01.000Z")})
    assert "not refreshed" not in recovery.missing(live, ages=watch.ages())
    clock[0] += 61  # then it stops rewriting it
    watch.saw({"h/1/banlist/a": live["h/1/banlist/a"].replace("00.000Z", "01.000Z")})
    assert "not refreshed for 61 s" in recovery.missing(live, ages=watch.ages())


def test_a_replica_is_not_ready_while_what_redis_lost_is_not_written_back(
        redis_server, settings):
    """Between taking Redis's copy and writing the lost changes back, the replica's own copy
    lacks them: it says so (not as if its own mark were another replica's) and answers 503.
    Redis refuses scripts meanwhile (an ACL), so the write-back waits."""
    admin = redis.Redis(port=redis_server.port, socket_timeout=5)  # bytes: DUMP's payloads
    with app_on(redis_server, settings, "a") as a:
        for host in HOSTS[:3]:
            ban(a, host)
        keys = admin.keys("*")
        pipe = admin.pipeline(transaction=True)  # one cut of every key, as a backup takes it
        for key in keys:
            pipe.dump(key)
        backup = dict(zip(keys, pipe.execute(), strict=True))
        for host in HOSTS[3:]:
            ban(a, host)
        admin.execute_command("ACL", "SETUSER", "default", "-eval", "-evalsha", "-fcall")
        try:
            pipe = admin.pipeline(transaction=True)  # Redis put back to the backup, at once
            pipe.flushdb()
            for key, dumped in backup.items():
                pipe.restore(key, 0, dumped)
            pipe.execute()
            until(lambda: "writes them back on its next round"
                  in (a.get("/readyz").json()["banlist_missing"] or ""))
            ready = a.get("/readyz")
            assert ready.status_code == 503 and ready.json()["ready"] is False
            assert "lacks the 3 change(s) Redis lost (seq 4 to 6)" \
                in ready.json()["banlist_missing"]
        finally:
            admin.execute_command("ACL", "SETUSER", "default", "+@all")
        until(lambda: a.get("/readyz").status_code == 200)
        assert a.get("/readyz").json()["banlist_missing"] is None
        assert all(banned(a, host) for host in HOSTS)
