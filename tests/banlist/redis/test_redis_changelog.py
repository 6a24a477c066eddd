"""A changelog holding one seq twice: a fork (different changes) is refused by every replica,
a replay (the same change again) is skipped. On a real redis-server, records written into it
directly, as Redis replaying a refused import from its AOF would leave them."""
from __future__ import annotations

import orjson
import pytest

from app.api.errors import status_of
from app.banlist.base import EntrySpec
from app.errors import BanlistError
from tests.banlist.redis.test_redis_fork import refusing_throughout
from tests.banlist.redis.test_redis_store import banned, state_of, wait_for

ENTRIES, STREAM = "rearrange:{banlist}:entries", "rearrange:{banlist}:stream"


def forks_counted(store) -> float:
    return store.events.registry.get_sample_value(
        "rearrange_redis_refusals_total", {"structure": "banlist", "cause": "fork"})


def four_bans(replicas):
    a = replicas("a")
    for i in range(4):
        a.add(EntrySpec("host", f"h{i}.example", "r"), "tns")
    wait_for(lambda: a.sync_state().in_sync)
    return a


def write_seq_again(redis_server, seq: int, change) -> None:
    """Append a record numbered `seq` (already in the stream) made by `change(fields)`."""
    with redis_server.client() as r:
        fields = next(f for _, f in r.xrange(STREAM) if f["seq"] == str(seq))
        again = change(dict(fields))
        pipe = r.pipeline(transaction=True)
        if again["op"] == "add":
            pipe.hset(ENTRIES, again["key"], again["payload"])
        pipe.xadd(STREAM, again).execute()


def ghost(fields):
    payload = orjson.loads(fields["payload"])
    payload["value"] = "ghost.example"
    return {**fields, "payload": orjson.dumps(payload).decode(), "reason": "a refused import"}


def test_a_seq_written_twice_with_different_changes_is_refused_by_every_replica(
        redis_server, replicas):
    a = four_bans(replicas)
    write_seq_again(redis_server, 3, ghost)  # seq 3 again, another ban; Redis's seq stays 4
    wait_for(lambda: a.sync_state().diverged is not None)
    b = replicas("b")  # a new pod: loads what Redis holds, and is told it forked too
    for store in (a, b):
        why = store.sync_state().diverged
        assert "rewritten" in why and "seq 3 twice" in why, why
        assert forks_counted(store) == 1
        with pytest.raises(BanlistError) as info:
            store.add(EntrySpec("host", "x.example", "r"), "tns")
        assert status_of(info.value) == 503 and "seq 3 twice" in info.value.problem
        with pytest.raises(BanlistError) as info:  # no phantom history served
            store.changes_since(0)
        assert status_of(info.value) == 503 and "seq 3 twice" in info.value.problem
    refusing_throughout([a, b], 1.0)
    assert banned(a, "http://h2.example/") == "3" and banned(a, "http://ghost.example/") is None
    assert banned(b, "http://ghost.example/") == "3"  # b holds Redis's state, flagged

    # keep a's copy: the reseed rewrites the changelog as one history; b follows it
    with pytest.raises(BanlistError) as info:
        a.reseed("sre", "redis replayed a refused import")
    assert info.value.field == "force"
    assert a.reseed("sre", "redis replayed a refused import", force=True)["seq"] == 5
    for store in (a, b):
        wait_for(lambda s=store: s.sync_state().in_sync and s.version == 5)
        assert store.sync_state().diverged is None
    assert state_of(a) == state_of(b) and banned(b, "http://ghost.example/") is None
    assert [c["op"] for c in b.changes_since(0)] == ["reseed"]
    b.add(EntrySpec("host", "after.example", "r"), "tns")
    wait_for(lambda: a.version == 6)


def test_the_same_change_written_twice_is_a_replay_and_skipped(redis_server, replicas):
    a = four_bans(replicas)
    write_seq_again(redis_server, 2, lambda fields: fields)  # an exact replay of seq 2
    a.add(EntrySpec("host", "next.example", "r"), "tns")  # applied past the replay
    b = replicas("b")
    for store in (a, b):
        wait_for(lambda s=store: s.version == 5 and s.sync_state().in_sync)
        assert store.sync_state().diverged is None and forks_counted(store) == 0
        assert [c["seq"] for c in store.changes_since(0)] == [1, 2, 3, 4, 5]
    assert state_of(a) == state_of(b)
    b.add(EntrySpec("host", "after.example", "r"), "tns")
    wait_for(lambda: a.version == 6 and a.sync_state().in_sync)
