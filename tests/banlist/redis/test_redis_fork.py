"""A Redis that lost changes and was written again: replicas holding the lost ones must not follow.

A redis-server without AOF brings back its last SAVE after a kill -9; whatever was written
after it is lost, and new writes take the lost changes' seqs. A replica that applied a
lost change holds another history from then on, even once Redis's seq is back at its own.

A replica that saw the lost changes arrive writes them back by itself (test_lost_changes.py,
recovery.py); the replicas here were restarted from their snapshots after the loss, so
their journals are empty and which changes were lost cannot be told: they refuse Redis,
mark the loss, and the replicas that follow Redis are not ready until an operator repairs it.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.api.errors import status_of
from app.banlist.base import EntrySpec
from app.errors import BanlistError
from tests.banlist.redis.test_redis_store import banned, state_of, wait_for
from tests.redis_server import RedisServer

SEQ, STREAM = "rearrange:{banlist}:seq", "rearrange:{banlist}:stream"


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """Without AOF: a restart after a kill loads the last SAVE, what came after is lost."""
    server = RedisServer(tmp_path / "redis", appendonly=False).start()
    yield server
    server.kill()


def refusing_throughout(stores, seconds: float) -> None:
    """For `seconds`, none of `stores` may drop its refusal or report itself in sync."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for store in stores:
            state = store.sync_state()
            assert state.diverged and not state.in_sync, state
        time.sleep(0.01)


def refusals(store) -> float:
    return store.events.registry.get_sample_value("rearrange_banlist_backward_refused_total")


def resyncs(store, cause: str) -> float | None:
    return store.events.registry.get_sample_value("rearrange_banlist_resyncs_total",
                                                   {"cause": cause})


def lose_the_eighth_change(redis_server, replicas, *names: str):
    """Seven changes, SAVE, an eighth that every replica applies, kill -9, restart at seq 7;
    the replicas restart too, from their snapshots (seq 8), with nothing in their journals."""
    stores = [replicas(name) for name in names]
    for i in range(7):
        stores[0].add(EntrySpec("host", f"h{i}.example", "r"), "tns")
    with redis_server.client() as r:
        r.save()
    lost = stores[0].add(EntrySpec("domain", "lost.example", "acknowledged, then lost"), "tns")
    for store in stores:
        wait_for(lambda s=store: s.version == 8)
        store.close()
    redis_server.restart()
    with redis_server.client() as r:
        assert r.get(SEQ) == "7"
    stores = [replicas(name) for name in names]
    for store in stores:
        wait_for(lambda s=store: "went backwards" in (s.sync_state().diverged or ""))
    return stores, lost


def missing_from(store) -> str:
    """Why a replica that follows Redis is not ready: the loss another replica marked."""
    state = store.sync_state()
    assert not state.in_sync and state.missing, state
    return state.missing


def test_a_fresh_replica_writing_into_a_rewound_redis_does_not_pull_the_others_along(
        redis_server, replicas):
    (a, b), lost = lose_the_eighth_change(redis_server, replicas, "a", "b")
    c = replicas("c")  # an autoscaled pod: no snapshot, takes what Redis holds
    assert c.version == 7
    wait_for(lambda: c.sync_state().missing is not None)  # a and b marked what Redis lost
    assert "holds seq 8" in missing_from(c) and "rearrange banlist reseed" in missing_from(c)
    new = c.add(EntrySpec("domain", "new.example", "written after the rewind"), "tns")
    assert new.id == "8"
    refusing_throughout([a, b], 2.5)  # Redis's seq is back at theirs: still not the same history
    for store in (a, b):
        assert "rewritten" in store.sync_state().diverged and store.version == 8
        assert banned(store, "http://lost.example/") == lost.id
        assert banned(store, "http://new.example/") is None
        assert refusals(store) == 2  # went backwards, then rewritten
        with pytest.raises(BanlistError) as info:
            store.add(EntrySpec("host", "x.example", "r"), "tns")
        assert status_of(info.value) == 503
    assert "holds seq 8" in missing_from(c) and banned(c, "http://lost.example/") is None

    # docs/banlist.md: reseed from the replica with the copy to keep; it replaces c's change
    with pytest.raises(BanlistError) as info:
        a.reseed("sre", "redis lost seq 8")
    assert info.value.field == "force" and "not applied" in info.value.problem
    out = a.reseed("sre", "redis lost seq 8", force=True)
    assert out["seq"] == 9 and out["replaced"]["seq"] == 8
    for store in (a, b, c):
        wait_for(lambda s=store: s.sync_state().in_sync and s.version == 9)
    assert state_of(a) == state_of(b) == state_of(c)
    assert banned(c, "http://lost.example/") == lost.id and banned(c, "http://new.example/") is None
    assert resyncs(c, "reseed") == 1  # c's copy was not the reseeded one
    assert resyncs(b, "reseed") == 0  # b held exactly a's copy: the reseed was a no-op
    b.add(EntrySpec("host", "after.example", "r"), "tns")  # writes work again
    wait_for(lambda: a.version == c.version == 10)


def test_writes_after_an_adopt_leave_the_other_replicas_diverged_until_they_adopt(
        redis_server, replicas):
    (a, b), lost = lose_the_eighth_change(redis_server, replicas, "a", "b")
    assert a.adopt() == {"epoch": a.sync_state().epoch, "seq": 7, "entries": 7}
    new = a.add(EntrySpec("domain", "new.example", "r"), "tns")
    assert new.id == "8"
    refusing_throughout([b], 2.0)
    assert "rewritten" in b.sync_state().diverged
    assert banned(b, "http://lost.example/") == lost.id and banned(b, "http://new.example/") is None
    # a let its copy go; b still holds the lost change, so a, following Redis, lacks it
    assert "holds seq 8" in missing_from(a)
    b.adopt()
    assert state_of(b) == state_of(a) and b.sync_state().diverged is None
    wait_for(lambda: b.sync_state().in_sync and a.sync_state().in_sync)
    a.add(EntrySpec("host", "after.example", "r"), "tns")
    wait_for(lambda: b.version == 9)


def test_a_replica_restarted_from_a_snapshot_is_checked_against_the_history_it_holds(
        redis_server, replicas):
    old = replicas("old")  # its snapshot will hold seq 7: Redis's history
    ahead = replicas("ahead")  # its snapshot will hold seq 8: the lost change
    a = replicas("a")
    for i in range(7):
        a.add(EntrySpec("host", f"h{i}.example", "r"), "tns")
    wait_for(lambda: old.version == 7)
    old.close()
    with redis_server.client() as r:
        r.save()
    lost = a.add(EntrySpec("domain", "lost.example", "r"), "tns")
    wait_for(lambda: ahead.version == 8)
    ahead.close()
    a.close()  # the writer goes too: no replica that saw the loss is left running
    redis_server.restart()
    c = replicas("c")
    c.add(EntrySpec("domain", "new.example", "r"), "tns")
    c.add(EntrySpec("domain", "newer.example", "r"), "tns")  # seq 9: past the snapshot's

    ahead = replicas("ahead")  # from its snapshot at seq 8
    assert ahead.version == 8 and "rewritten" in ahead.sync_state().diverged
    refusing_throughout([ahead], 1.5)
    assert ahead.version == 8 and banned(ahead, "http://lost.example/") == lost.id
    assert banned(ahead, "http://newer.example/") is None  # seq 9 was not applied over it

    old = replicas("old")  # from its snapshot at seq 7: the history Redis still holds
    wait_for(lambda: old.version == 9 and old.sync_state().missing is not None)
    assert state_of(old) == state_of(c) and old.sync_state().diverged is None
    assert "holds seq 8" in missing_from(old)  # `ahead` holds the change Redis lost
    assert resyncs(old, "gap") == resyncs(old, "start") == 0  # followed the stream


def test_a_change_that_reuses_an_applied_seq_is_a_fork_not_a_replay(redis_server, replicas):
    a = replicas("a")
    for i in range(4):
        a.add(EntrySpec("host", f"h{i}.example", "r"), "tns")
    wait_for(lambda: a.sync_state().in_sync)
    epoch = a.sync_state().epoch
    with redis_server.client() as r:  # Redis's seq rewound to 3, then a change took seq 4 again
        pipe = r.pipeline(transaction=True)
        pipe.set(SEQ, 4).hdel("rearrange:{banlist}:entries", "1")
        pipe.xadd(STREAM, {"seq": 4, "epoch": epoch, "op": "remove", "key": "1",
                           "payload": "", "actor": "other", "reason": "after a rewind"})
        pipe.execute()
    wait_for(lambda: a.sync_state().diverged is not None)
    assert "rewritten" in a.sync_state().diverged
    refusing_throughout([a], 1.0)
    assert a.version == 4 and banned(a, "http://h0.example/") == "1"


def test_a_changelog_trimmed_past_a_follower_is_not_a_fork(redis_server, replicas):
    a, b = replicas("a"), replicas("b")
    for i in range(3):
        a.add(EntrySpec("host", f"h{i}.example", "r"), "tns")
    wait_for(lambda: b.version == 3)
    with redis_server.client() as r:  # a quiet day: retention took every record, b's last too
        r.xtrim(STREAM, maxlen=0, approximate=False)
    a.add(EntrySpec("host", "next.example", "r"), "tns")
    wait_for(lambda: b.version == 4 and b.sync_state().in_sync)
    assert state_of(b) == state_of(a) and b.sync_state().diverged is None
    assert resyncs(b, "gap") == 0 and refusals(b) == 0


def test_a_refused_copy_stays_refused_when_the_changelog_no_longer_reaches_it(
        redis_server, replicas):
    a = replicas("a")
    for i in range(4):
        a.add(EntrySpec("host", f"h{i}.example", "r"), "tns")
    epoch = a.sync_state().epoch
    with redis_server.client() as r:
        r.set(SEQ, 2)  # a rewind
    wait_for(lambda: "went backwards" in (a.sync_state().diverged or ""))
    with redis_server.client() as r:  # then changes past a's seq; retention took the rest
        pipe = r.pipeline(transaction=True)
        pipe.xtrim(STREAM, maxlen=0, approximate=False).hdel("rearrange:{banlist}:entries", "1")
        pipe.xadd(STREAM, {"seq": 5, "epoch": epoch, "op": "remove", "key": "1",
                           "payload": "", "actor": "other", "reason": "after the rewind"})
        # a hand edit, not a write script: the digest it kept no longer fits; a replica
        # computes it again from Redis's entries
        pipe.delete("rearrange:{banlist}:digest")
        pipe.set(SEQ, 5).execute()
    wait_for(lambda: "cannot be told" in (a.sync_state().diverged or ""))
    refusing_throughout([a], 1.0)
    assert a.version == 4 and banned(a, "http://h0.example/") == "1"
    assert a.adopt()["seq"] == 5 and banned(a, "http://h0.example/") is None
    wait_for(lambda: a.sync_state().in_sync)
