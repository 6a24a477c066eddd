"""Bulk writes through Redis against a real redis-server: one script, all or nothing, and an
exact answer when Redis goes away mid-import."""
from __future__ import annotations

import threading
import time

import pytest
import redis

from app.api.errors import status_of
from app.banlist.base import EntrySpec
from app.banlist.redis import store as redis_store
from app.errors import BanlistError
from app.observability.metrics import Metrics
from tests.banlist.redis.test_redis_store import state_of, wait_for

SEQ, ENTRIES = "rearrange:{banlist}:seq", "rearrange:{banlist}:entries"


def specs(n: int, prefix: str = "h") -> list[EntrySpec]:
    return [EntrySpec("host", f"{prefix}{i}.example", "link farm") for i in range(n)]


def run_in_thread(fn, *args) -> tuple[threading.Thread, dict]:
    """fn(*args) in a thread; the result or the BanlistError lands in the returned dict."""
    got: dict = {}

    def target() -> None:
        try:
            got["result"] = fn(*args)
        except BanlistError as exc:
            got["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, got


def test_an_import_is_one_script_with_consecutive_seqs_despite_other_writers(replicas):
    a, b = replicas("a"), replicas("b")
    stop = threading.Event()
    singles: list[int] = []

    def other_writer() -> None:
        i = 0
        while not stop.is_set():
            singles.append(int(b.add(EntrySpec("host", f"single{i}.example", "r"), "b").id))
            i += 1

    writer = threading.Thread(target=other_writer)
    writer.start()
    wait_for(lambda: len(singles) >= 3)
    entries = a.add_many(specs(3000), "bulk")
    stop.set()
    writer.join()
    ids = [int(e.id) for e in entries]
    assert ids == list(range(ids[0], ids[0] + 3000))  # no single write landed in between
    assert not set(ids) & set(singles)
    wait_for(lambda: a.version == b.version == 3000 + len(singles))
    assert state_of(a) == state_of(b)


def test_more_than_one_script_can_carry_is_refused_before_anything_is_written(replicas,
                                                                              monkeypatch):
    monkeypatch.setattr(redis_store, "MAX_SCRIPT", 10)
    a = replicas("a")
    with pytest.raises(BanlistError) as info:
        a.add_many(specs(11), "bulk")
    assert status_of(info.value) == 413 and a.version == 0


def test_a_refusal_inside_a_script_leaves_redis_as_it_was(replicas, redis_server):
    a = replicas("a")
    a.add(EntrySpec("host", "first.example", "r"), "tns")
    payload = '{"scope": "host", "value": "x.example", "reason": "r", "actor": "t", ' \
              '"created_at": "2024-01-01T00:00:00Z", "expires_at": null, "regions": []}'
    changes = ["add", "", payload, "t", "r", ""] * 2 + ["add", "", payload, "t", "r", "nogroup"]
    with pytest.raises(redis.ResponseError, match="REARRANGE_NOGROUP"):
        a._write(keys=[*a.keys.write(), a.keys.outcome("0" * 32), a.keys.digest,
                       a.keys.history],
                 args=[str(a.replica.epoch), a.retention_ms, 60, "attempt", "", a.history_ms,
                       *changes])
    with redis_server.client() as r:  # the two adds before the refused one were not made
        assert r.get(SEQ) == "1" and r.hlen(ENTRIES) == 1
        assert r.xlen("rearrange:{banlist}:stream") == 1


def test_an_import_is_refused_whole_when_redis_is_out_of_memory(replicas, redis_server):
    a = replicas("a")
    a.add_many(specs(200, "warm"), "bulk")
    with redis_server.client() as r:
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", int(r.info("memory")["used_memory"]) - 1)
        with pytest.raises(BanlistError) as info:  # refused before its first write
            a.add_many(specs(3000), "bulk")
        assert "maxmemory" in info.value.problem and status_of(info.value) == 503
        assert int(r.get(SEQ)) == 200 and r.hlen(ENTRIES) == 200
        r.config_set("maxmemory", 0)
    first = a.add_many(specs(3000), "bulk")
    assert [int(e.id) for e in first] == list(range(201, 3201))
    b = replicas("b")
    assert state_of(a) == state_of(b) and b.version == 3200


def pause_writes(redis_server, ms: int) -> None:
    """Hold every write command on the server (reads go on), as a busy or stalled Redis."""
    with redis_server.client() as r:
        r.execute_command("CLIENT", "PAUSE", ms, "WRITE")


def test_redis_killed_mid_import_commits_nothing_and_says_so(replicas, redis_server):
    a, b = replicas("a"), replicas("b")
    a.add(EntrySpec("host", "before.example", "r"), "tns")
    wait_for(lambda: b.version == 1)
    pause_writes(redis_server, 30_000)  # the import reaches Redis and waits there
    thread, got = run_in_thread(a.add_many, specs(2000), "bulk")
    time.sleep(0.3)
    redis_server.kill()  # with the import received, not yet run
    thread.join(15)
    err = got["error"]
    assert status_of(err) == 503 and err.extra == {"write_id": err.extra["write_id"],
                                               "outcome": "unknown"}
    redis_server.restart()  # the append-only file: everything acknowledged, nothing else
    assert a.write_state(err.extra["write_id"]) == {"write_id": err.extra["write_id"],
                                                    "committed": False}
    assert a.write_state(err.extra["write_id"])["committed"] is False  # settled for good
    wait_for(lambda: a.sync_state().in_sync and b.sync_state().in_sync)
    with redis_server.client() as r:
        assert r.get(SEQ) == "1" and r.hlen(ENTRIES) == 1
    entries = a.add_many(specs(2000), "bulk")  # the retry commits it once, whole
    assert [int(e.id) for e in entries] == list(range(2, 2002))
    wait_for(lambda: b.version == 2001)
    assert state_of(a) == state_of(b)


def test_redis_back_quickly_after_a_kill_mid_import_gets_a_definite_no(replicas, redis_server):
    a = replicas("a")
    a.add(EntrySpec("host", "before.example", "r"), "tns")
    pause_writes(redis_server, 30_000)
    thread, got = run_in_thread(a.add_many, specs(500), "bulk")
    time.sleep(0.3)
    redis_server.kill()
    redis_server.start()  # back within the writer's settling window
    thread.join(15)
    err = got["error"]
    assert status_of(err) == 503 and "not made" in err.problem and not err.extra
    with redis_server.client() as r:
        assert r.get(SEQ) == "1" and r.hlen(ENTRIES) == 1


def test_an_import_not_yet_run_when_its_writer_timed_out_is_fenced_off(replicas,
                                                                       redis_server):
    a, b = replicas("a"), replicas("b")
    a.add(EntrySpec("host", "before.example", "r"), "tns")
    pause_writes(redis_server, 6_000)  # longer than the writer's 5 s socket timeout
    with pytest.raises(BanlistError) as info:
        a.add_many(specs(300), "bulk")
    assert status_of(info.value) == 503 and "not made" in info.value.problem
    time.sleep(1.5)  # the pause is over: whatever was queued has run
    with redis_server.client() as r:
        assert r.get(SEQ) == "1" and r.hlen(ENTRIES) == 1
    assert [int(e.id) for e in a.add_many(specs(300), "bulk")] == list(range(2, 302))
    wait_for(lambda: b.version == 301)


def test_an_import_whose_answer_was_lost_but_committed_is_reported_committed(replicas,
                                                                             redis_server):
    from tests.redis_server import AnswerLosingProxy

    proxy = AnswerLosingProxy(redis_server.port)
    a = redis_store.RedisStore(proxy.url, Metrics(), None, block_seconds=0.3)
    a.start()
    try:
        b = replicas("b")
        a.add(EntrySpec("host", "before.example", "r"), "tns")  # the script is cached now
        proxy.armed.set()
        entries = a.add_many(specs(300), "bulk")  # Redis ran it; the answer was cut off
        assert proxy.cut.is_set()
        assert [int(e.id) for e in entries] == list(range(2, 302))
        assert a.events.registry.get_sample_value(
            "rearrange_banlist_redis_errors_total", {"op": "write"}) == 1
        wait_for(lambda: b.version == 301)
        assert state_of(a) == state_of(b)
        with redis_server.client() as r:
            assert r.get(SEQ) == "301"  # committed once, not twice
    finally:
        a.close()
        proxy.close()


def test_a_large_seed_is_staged_and_swapped_in_whole(replicas, monkeypatch, redis_server):
    monkeypatch.setattr(redis_store, "MAX_SCRIPT", 10)
    a, b = replicas("a"), replicas("b")
    assert a.seed(specs(25)) == 25 and len(a) == 25 and a.version == 26
    assert b.seed(specs(3, "late")) == 0
    wait_for(lambda: b.version == 26)
    assert state_of(a) == state_of(b)
    assert sorted(int(e.id) for e in a.index) == list(range(1, 26))
    assert a.changes_since(0) == [{"seq": 26, "op": "seed", "entries": 25, "actor": "seed",
                                   "reason": "seed", "at": a.changes_since(0)[0]["at"]}]
    assert a.add(EntrySpec("host", "next.example", "r"), "tns").id == "27"
    wait_for(lambda: b.version == 27)
    with redis_server.client() as r:
        assert not r.keys("rearrange:{banlist}:seed:*")  # the staging hash became the list


def test_a_lost_write_can_be_asked_about_over_http(redis_server, settings):
    from tests.conftest import AUTH, app_on

    with app_on(redis_server, settings, "a") as client:
        added = client.post("/v1/banlist/entries", headers=AUTH, json={
            "scope": "host", "value": "x.example", "reason": "r"})
        assert added.status_code == 201
        r = client.get("/v1/banlist/writes/" + "a" * 32, headers=AUTH)
        assert r.json() == {"write_id": "a" * 32, "committed": False}
        bad = client.get("/v1/banlist/writes/nope", headers=AUTH)
        assert bad.status_code == 422 and bad.json()["field"] == "write_id"
        assert client.get("/v1/banlist/writes/" + "a" * 32).status_code == 401


def test_a_status_query_fences_a_write_that_has_not_run_for_good(replicas, redis_server):
    from app.banlist.redis import outcomes

    a = replicas("a")
    a.add(EntrySpec("host", "first.example", "r"), "tns")
    write_id = "ab" * 16
    key = a.keys.outcome(write_id)
    # the status query runs first (the write is still in flight on a stalled socket) ...
    assert outcomes.state(a.client, key, write_id, 60_000) == {"write_id": write_id,
                                                               "committed": False}
    payload = '{"scope": "host", "value": "late.example", "reason": "r", "actor": "t", ' \
              '"created_at": "2024-01-01T00:00:00Z", "expires_at": null, "regions": []}'
    # ... then the write arrives: refused, so the answer "not committed" stays true
    with pytest.raises(redis.ResponseError, match="REARRANGE_ABORTED"):
        a._write(keys=[*a.keys.write(), key, a.keys.digest, a.keys.history],
                 args=[str(a.replica.epoch), a.retention_ms, 60, "another-attempt", "",
                       a.history_ms, "add", "", payload, "t", "r", ""])
    with redis_server.client() as r:
        assert r.get(SEQ) == "1" and r.hlen(ENTRIES) == 1
    assert outcomes.state(a.client, key, write_id, 60_000)["committed"] is False


def test_two_first_starts_seeding_at_once_commit_one_seed(replicas, redis_server):
    a, b = replicas("a"), replicas("b")  # both started on an empty Redis
    assert b.seed(specs(3, "b")) == 3
    # a checked `exists(epoch)` before b's script ran: its script must still refuse
    with pytest.raises(BanlistError) as info:
        a.put_import((), specs(3, "a"), "seed", fresh=True)
    assert info.value.field == "seed" and status_of(info.value) == 409
    with redis_server.client() as r:
        assert r.get(SEQ) == "3" and r.hlen(ENTRIES) == 3
    wait_for(lambda: a.version == 3)
    assert sorted(e.value for e in a.active()) == ["b0.example", "b1.example", "b2.example"]
