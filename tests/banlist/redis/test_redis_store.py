"""The Redis-backed banlist against a real redis-server: replication, gaps, rewinds, TTL."""
from __future__ import annotations

import threading
import time

import pytest

from app.api.errors import status_of
from app.banlist import canon
from app.banlist.base import EntrySpec
from app.errors import BanlistError


def wait_for(cond, timeout: float = 5.0) -> float:
    """Seconds until cond() is true; fails the test after `timeout`."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - start


def banned(store, url: str, now: float | None = None) -> str | None:
    c = canon.canonicalize(url)
    found = store.index.match(c, canon.split(c)[0], None, now or time.time())
    return found.id if found else None


def state_of(store) -> tuple:
    return (store.version, sorted((e.id, e.scope, e.value) for e in store.index),
            dict(store.index.groups))


def test_a_ban_through_one_replica_is_seen_by_the_other_within_a_second(replicas):
    a, b = replicas("a"), replicas("b")
    entry = a.add(EntrySpec("domain", "spam.example", "doorways"), "tns")
    assert banned(a, "http://www.spam.example/x") == entry.id  # read-your-writes, no wait
    assert wait_for(lambda: banned(b, "http://www.spam.example/x") == entry.id, 1.0) < 1.0
    assert b.version == a.version == 1 and b.index.get(entry.id) == entry
    def lag_count() -> float:
        return b.events.registry.get_sample_value(
            "rearrange_banlist_replication_lag_seconds_count")

    before = lag_count()
    a.remove(entry.id, "appeals", "appeal granted")
    wait_for(lambda: banned(b, "http://www.spam.example/x") is None, 1.0)
    assert lag_count() == before + 1  # the removal came through the stream, lag observed


def test_a_replica_started_later_gets_the_whole_list(replicas):
    a = replicas("a")
    a.define_group("acme", ["acme.com", "acme-shop.net"], "tns", "one owner")
    kept = [a.add(EntrySpec("host", f"h{i}.com", "r"), "tns") for i in range(20)]
    org = a.add(EntrySpec("org", "acme", "court order", ("ru",)), "legal")
    a.remove(kept.pop(3).id, "tns", "mistake")
    c = replicas("c")
    assert state_of(c) == state_of(a) and c.version == 23
    assert c.sync_state().in_sync and c.sync_state().epoch == a.sync_state().epoch
    hit = c.index.match("http://shop.acme-shop.net/", "shop.acme-shop.net", "RU", time.time())
    assert hit == org
    assert c.events.registry.get_sample_value(
        "rearrange_banlist_resyncs_total", {"cause": "start"}) == 1


def test_redefining_a_group_moves_its_bans_on_every_replica(replicas):
    a, b = replicas("a"), replicas("b")
    a.define_group("acme", ["acme.com"], "tns", "owner")
    a.add(EntrySpec("org", "acme", "court order"), "legal")
    wait_for(lambda: banned(b, "http://acme.com/") is not None)
    a.define_group("acme", ["acme.org"], "tns", "the owner moved")
    wait_for(lambda: banned(b, "http://acme.com/") is None and banned(b, "http://x.acme.org/"))
    with pytest.raises(BanlistError, match="no org group"):
        a.add(EntrySpec("org", "nobody", "r"), "tns")


def test_concurrent_writers_on_two_replicas_lose_no_update(replicas):
    a, b = replicas("a"), replicas("b")
    ids: list[str] = []
    errors: list[BanlistError] = []

    def write(store, who: str) -> None:
        for i in range(100):
            try:
                ids.append(store.add(EntrySpec("host", f"{who}{i}.com", "r"), who).id)
            except BanlistError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(s, w)) for s, w in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(ids)) == 200 and sorted(map(int, ids)) == list(range(1, 201))
    wait_for(lambda: a.version == b.version == 200)
    assert state_of(a) == state_of(b) and len(a) == 200
    # each one's tailing read raced its own writes' catch-ups: a replay, never a fork
    assert a.sync_state().diverged is b.sync_state().diverged is None
    seqs = [c["seq"] for c in a.changes_since(0, 1000)]
    assert seqs == list(range(1, 201))
    assert [c["seq"] for c in b.changes_since(150, 10)] == list(range(151, 161))


def test_stream_trimmed_past_a_replica_forces_a_full_resync(replicas, redis_server):
    a, b = replicas("a"), replicas("b")
    for i in range(5):
        a.add(EntrySpec("host", f"old{i}.com", "r"), "tns")
    wait_for(lambda: b.version == 5)
    b.close()  # b stops (its snapshot file says seq 5)
    gone = a.add(EntrySpec("host", "gone.com", "r"), "tns")
    for i in range(10):
        a.add(EntrySpec("host", f"new{i}.com", "r"), "tns")
    a.remove(gone.id, "tns", "appeal")
    with redis_server.client() as r:
        r.xtrim("rearrange:{banlist}:stream", maxlen=2, approximate=False)  # retention ran past b
    b2 = replicas("b")  # cold start from b's snapshot at seq 5, then the stream has a gap
    wait_for(lambda: b2.version == a.version)
    assert state_of(b2) == state_of(a) and banned(b2, "http://gone.com/") is None
    assert b2.events.registry.get_sample_value(
        "rearrange_banlist_resyncs_total", {"cause": "gap"}) == 1


def test_redis_restarted_empty_the_replica_keeps_its_copy_until_reseeded(replicas,
                                                                         redis_server):
    a = replicas("a")
    for i in range(3):
        a.add(EntrySpec("domain", f"bad{i}.com", "r"), "tns")
    before = state_of(a)
    redis_server.restart(empty=True)
    wait_for(lambda: a.sync_state().diverged is not None)
    assert state_of(a) == before and banned(a, "http://bad1.com/") is not None
    state = a.sync_state()
    assert not state.in_sync and "no banlist" in state.diverged
    reg = a.events.registry
    assert reg.get_sample_value("rearrange_banlist_backward_refused_total") == 1
    with pytest.raises(BanlistError) as info:  # writing into the empty Redis would fork history
        a.add(EntrySpec("host", "x.com", "r"), "tns")
    assert status_of(info.value) == 503 and "suspended" in info.value.problem
    out = a.reseed("sre", "redis lost its data")
    assert out["entries"] == 3 and out["seq"] == 4 and out["replaced"]["epoch"] is None
    wait_for(lambda: a.sync_state().in_sync and a.version == 4)
    fresh = replicas("fresh")
    assert state_of(fresh)[1:] == state_of(a)[1:] and fresh.version == 4
    assert a.changes_since(3)[0]["op"] == "reseed"
    a.add(EntrySpec("host", "after.com", "r"), "tns")  # writes work again
    wait_for(lambda: fresh.version == 5)


def test_a_redis_that_went_backwards_is_refused(replicas, redis_server):
    a = replicas("a")
    for i in range(4):
        a.add(EntrySpec("host", f"h{i}.com", "r"), "tns")
    with redis_server.client() as r:
        r.set("rearrange:{banlist}:seq", 2)  # as if restored from an older backup
    wait_for(lambda: a.sync_state().diverged is not None)
    assert "went backwards" in a.sync_state().diverged and len(a) == 4
    with pytest.raises(BanlistError) as info:
        a.add(EntrySpec("host", "x.com", "r"), "tns")
    assert status_of(info.value) == 503
    out = a.reseed("sre", "restored an old backup")  # same epoch, older seq: no force needed
    assert out["replaced"]["seq"] == 2 and out["seq"] == 5
    wait_for(lambda: a.sync_state().in_sync and a.version == 5)
    with pytest.raises(BanlistError, match="not behind"):
        a.reseed("sre", "again")


def test_redis_killed_mid_stream_nothing_acknowledged_is_lost(replicas, redis_server):
    a, b = replicas("a"), replicas("b")
    acked: list[str] = []
    refused = 0
    for i in range(60):
        if i == 20:
            redis_server.kill()
        if i == 40:
            redis_server.restart()  # the append-only file brings back every acknowledged write
        try:
            acked.append(a.add(EntrySpec("host", f"k{i}.com", "r"), "tns").id)
        except BanlistError as exc:
            assert status_of(exc) == 503
            refused += 1
            if i < 40:
                assert banned(a, "http://k0.com/") is not None  # still serving its copy
                assert not a.sync_state().in_sync or a.sync_state().problem
    assert 0 < refused <= 21 and len(acked) == 60 - refused
    wait_for(lambda: a.sync_state().in_sync and b.sync_state().in_sync and b.version == 40)
    for store in (a, b):
        assert sorted(int(e.id) for e in store.index) == sorted(map(int, acked))
        assert store.sync_state().problem is None


def test_a_write_while_redis_is_down_is_certainly_not_made(replicas, redis_server):
    """Redis cannot be reached before the write is sent: the answer is a definite no, not
    an outcome to ask about later (a write whose answer was lost is `settle`'s)."""
    a = replicas("a")
    a.add(EntrySpec("host", "kept.example", "r"), "tns")
    redis_server.kill()
    with pytest.raises(BanlistError) as info:
        a.add(EntrySpec("host", "lost.example", "r"), "tns")
    assert status_of(info.value) == 503 and info.value.extra == {}
    assert "the change was not made" in info.value.problem
    redis_server.restart()
    wait_for(lambda: a.sync_state().in_sync)
    assert [e.value for e in a.index] == ["kept.example"]
    assert banned(a, "http://lost.example/") is None


def test_staleness_grows_while_redis_is_down_and_recovers(replicas, redis_server):
    a = replicas("a")
    a.add(EntrySpec("host", "x.com", "r"), "tns")
    wait_for(lambda: a.sync_state().in_sync)
    redis_server.kill()
    wait_for(lambda: a.sync_state().staleness_seconds > 1.0, 5)
    assert not a.sync_state().in_sync and "unreachable" in a.sync_state().problem
    assert banned(a, "http://x.com/") is not None
    redis_server.restart()
    wait_for(lambda: a.sync_state().in_sync, 5)
    assert a.sync_state().staleness_seconds < 1.0


def test_cold_start_from_the_local_snapshot_while_redis_is_down(replicas, redis_server):
    a = replicas("a", snapshot_seconds=0.1)
    entry = a.add(EntrySpec("domain", "cold.example", "r"), "tns")
    wait_for(lambda: (a.replica.snapshot_path.exists()
                      and a.replica._snap_seq == a.version))
    a.close()
    redis_server.kill()
    again = replicas("a")
    assert again.index.get(entry.id) == entry and again.version == 1
    state = again.sync_state()
    assert state.details["loaded"] and not state.in_sync and state.staleness_seconds > 0
    nothing = replicas("never-synced")
    assert not nothing.sync_state().details["loaded"] and len(nothing) == 0
    redis_server.restart()
    wait_for(lambda: again.sync_state().in_sync and nothing.version == 1)


def test_ttl_expiry_on_both_replicas_and_one_recorded_expiry(replicas):
    a, b = replicas("a"), replicas("b")
    entry = a.add(EntrySpec("host", "ttl.com", "temporary", expires_at=time.time() + 0.6),
                  "tns")
    wait_for(lambda: b.version == 1)
    until = entry.expires_at
    assert banned(a, "http://ttl.com/", until - 0.01) == banned(b, "http://ttl.com/",
                                                                until - 0.01) == entry.id
    # at the expiry instant it stops matching everywhere, before any sweep ran
    assert banned(a, "http://ttl.com/", until) is None
    assert banned(b, "http://ttl.com/", until) is None
    wait_for(lambda: time.time() > until)
    results = []
    sweepers = [threading.Thread(target=lambda s=s: results.append(s.sweep())) for s in (a, b)]
    for t in sweepers:
        t.start()
    for t in sweepers:
        t.join()
    assert sorted(results) == [0, 1]  # both swept, the script recorded the expiry once
    wait_for(lambda: len(a) == len(b) == 0 and a.version == b.version == 2)
    last = a.changes_since(1)
    assert [(c["op"], c["id"], c["actor"]) for c in last] == [("expire", entry.id, "system")]


def test_bad_writes_are_refused_before_redis_is_touched(replicas):
    a = replicas("a")
    with pytest.raises(BanlistError) as info:
        a.add_many([EntrySpec("host", "ok.com", "r"), EntrySpec("domain", "co.uk", "r")], "tns")
    assert info.value.field == "[1].value" and a.version == 0
    with pytest.raises(BanlistError) as info:
        a.remove("99", "tns", "appeal")
    assert status_of(info.value) == 404


def test_a_lagging_replica_can_remove_what_it_has_not_applied_yet(replicas):
    a, b = replicas("a"), replicas("b")
    b.replica.stop()  # b stops tailing: it will not see the next add by itself
    entry = a.add(EntrySpec("host", "x.example", "r"), "tns")
    assert b.index.get(entry.id) is None
    removed = b.remove(entry.id, "appeals", "appeal granted")
    assert removed == entry and b.index.get(entry.id) is None
    wait_for(lambda: a.index.get(entry.id) is None)


def test_seed_fills_only_an_empty_redis(replicas):
    a = replicas("a")
    assert a.seed([EntrySpec("domain", "seeded.example", "sample")]) == 1
    b = replicas("b")
    assert b.seed([EntrySpec("domain", "again.example", "sample")]) == 0
    assert [e.value for e in b.active()] == ["seeded.example"]


def test_reseed_over_another_history_needs_force(replicas, redis_server):
    a = replicas("a")
    a.add(EntrySpec("host", "mine.example", "r"), "tns")
    with redis_server.client() as r:  # someone started a new history in Redis meanwhile
        r.flushall()
    wait_for(lambda: a.sync_state().diverged is not None)
    other = replicas("other")  # holds nothing: may write, and creates a new epoch
    other.add(EntrySpec("host", "theirs.example", "r"), "ops")
    wait_for(lambda: "another banlist history" in (a.sync_state().diverged or ""))
    with pytest.raises(BanlistError) as info:
        a.reseed("sre", "ours is right")
    assert info.value.field == "force" and status_of(info.value) == 409
    out = a.reseed("sre", "ours is right", force=True)
    assert out["replaced"]["seq"] == 1 and out["entries"] == 1
    wait_for(lambda: a.sync_state().in_sync)
    wait_for(lambda: [e.value for e in other.active()] == ["mine.example"])


def test_an_unreadable_local_snapshot_is_ignored(replicas, tmp_path):
    (tmp_path / "a.snapshot.json").write_text('{"format": 1, "seq": ')
    (tmp_path / "b.snapshot.json").write_text('{"format": 99}')
    a = replicas("a")
    b = replicas("b")
    assert a.sync_state().details["loaded"] and len(a) == 0
    assert b.sync_state().details["loaded"] and len(b) == 0


def test_a_malformed_record_in_redis_is_reported_not_fatal(replicas, redis_server):
    a = replicas("a")
    a.add(EntrySpec("host", "ok.example", "r"), "tns")
    with redis_server.client() as r:  # a record no writer of ours would produce
        r.xadd("rearrange:{banlist}:stream", {"seq": 2, "epoch": a.sync_state().epoch,
                                             "op": "add", "key": "2", "payload": "{not json",
                                             "actor": "x", "reason": "x"})
        r.set("rearrange:{banlist}:seq", 2)
    wait_for(lambda: "unreadable" in (a.sync_state().problem or ""))
    assert a.version == 1 and banned(a, "http://ok.example/") == "1"  # still serving
    assert not a.sync_state().in_sync
