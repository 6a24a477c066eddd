"""A bulk removal through Redis against a real redis-server (app/banlist/redis/batch.py):
committed in chunks, seen by every replica as one version, finished by another replica
when its writer dies, and exclusive: other writes and a resync wait for it."""
from __future__ import annotations

import threading

import pytest

from app.banlist.base import EntrySpec
from app.banlist.redis import batch
from app.banlist.selection import Selection
from tests.banlist.redis.test_redis_bulk import run_in_thread
from tests.helpers import until

CAMPAIGN = Selection(actor="alice", reason_contains="campaign 7")


def seeded(store) -> int:
    """Ten entries of the campaign, two others; the version after them."""
    store.add_many([EntrySpec("host", f"h{i}.camp.example", "Campaign 7") for i in range(10)],
                   "alice")
    store.add_many([EntrySpec("host", "keep.example", "court order"),
                    EntrySpec("host", "x.camp.example", "campaign 7", actor="bob")], "alice")
    return store.version


@pytest.fixture
def paused(monkeypatch):
    """paused(store): the store's next bulk removal stops after its first chunk (of 4) until
    `go` is set; `first` is set once that chunk is committed."""
    monkeypatch.setattr(batch, "CHUNK", 4)
    first, go = threading.Event(), threading.Event()

    def pause(store) -> tuple[threading.Event, threading.Event]:
        step = store.batches._step

        def stepping(**kw):
            done = step(**kw)
            if not first.is_set():
                first.set()
                assert go.wait(10), "the test never let the removal go on"
            return done

        monkeypatch.setattr(store.batches, "_step", stepping)
        return first, go

    return pause


def test_a_second_replica_sees_the_batch_as_one_version(replicas, paused, redis_server):
    a, b = replicas("a"), replicas("b")
    before = seeded(a)
    b.refresh()
    first, go = paused(a)
    thread, got = run_in_thread(a.remove_matching, CAMPAIGN, "carol", "undo campaign 7")
    assert first.wait(10)
    with redis_server.client() as r:  # four removals are in Redis and in its changelog
        assert int(r.get("rearrange:{banlist}:seq")) == before + 4
    b.refresh()  # b has read them, and holds them: it serves the list before the batch
    assert b.version == b.index.version == before and len(b) == 12
    go.set()
    thread.join(10)
    assert got == {"result": 10}
    assert a.version == before + 10 and len(a) == 2
    b.refresh()
    assert b.version == b.index.version == before + 10
    assert sorted(e.value for e in b.active()) == ["keep.example", "x.camp.example"]
    assert b.replica.digest == a.replica.digest
    with redis_server.client() as r:  # the digest Redis keeps is the replicas'
        assert r.get("rearrange:{banlist}:digest") == f"{before + 10}:{a.replica.digest:032x}"
        assert not r.keys("rearrange:{banlist}:batch*")  # closed: nothing left behind
    removals = [c for c in b.changes_since(before) if c["op"] == "remove"]
    assert len(removals) == 10
    assert {(c["actor"], c["reason"]) for c in removals} == {("carol", "undo campaign 7")}
    former = b.former("https://h3.camp.example/", "h3.camp.example")
    assert former[0]["ended"]["actor"] == "carol"


def test_a_batch_whose_writer_died_is_finished_by_another_replica(replicas, paused,
                                                                 redis_server):
    a, b = replicas("a"), replicas("b")
    before = seeded(a)
    first, go = paused(a)
    thread, got = run_in_thread(a.remove_matching, CAMPAIGN, "carol", "undo")
    assert first.wait(10)
    assert b.sweep() == 0  # its writer holds the lease: the batch is left to it
    with redis_server.client() as r:
        assert r.llen("rearrange:{banlist}:batch:list") == 6
        r.delete("rearrange:{banlist}:batch:lease")  # the writer went silent past its lease
    b.sweep()  # finishes the batch, from the list Redis holds
    b.refresh()
    assert b.version == before + 10 and len(b) == 2
    go.set()
    thread.join(10)
    assert got == {"result": 10}  # nothing left to do when it woke
    a.refresh()
    assert a.version == before + 10 and a.replica.digest == b.replica.digest
    assert len([c for c in b.changes_since(before) if c["op"] == "remove"]) == 10


def test_writes_and_a_resync_wait_for_a_batch_under_way(replicas, paused, monkeypatch):
    a, b = replicas("a"), replicas("b")
    before = seeded(a)
    first, go = paused(a)
    thread, got = run_in_thread(a.remove_matching, CAMPAIGN, "carol", "undo")
    assert first.wait(10)
    monkeypatch.setattr(batch, "WAIT_SECONDS", 0.0)
    thread_b, refused = run_in_thread(b.add, EntrySpec("host", "new.example", "r"), "tns")
    thread_b.join(10)
    error = refused["error"]
    assert error.field == "banlist" and "bulk removal by carol is under way" in error.problem
    assert "6 of 10 removals left" in error.problem
    c = replicas("c")  # started now, it would read half of the batch: it waits for it
    assert not c.replica.loaded and len(c) == 0
    go.set()
    thread.join(10)
    assert got == {"result": 10}
    until(lambda: c.replica.loaded and c.version == before + 10)
    assert len(c) == 2 and c.replica.digest == a.replica.digest
    monkeypatch.setattr(batch, "WAIT_SECONDS", 10.0)
    assert b.add(EntrySpec("host", "new.example", "r"), "tns").id == str(before + 11)
