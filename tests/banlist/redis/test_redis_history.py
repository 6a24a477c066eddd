"""The Redis store's history for T&S, on a real redis-server: filters over the stream, and
the gone entries a replica learns of from it, read on from where it stopped."""
from __future__ import annotations

import time

from app.banlist import canon
from app.banlist.base import EntrySpec
from app.banlist.history import ChangeFilter
from app.banlist.model import iso
from tests.helpers import until


def url(text: str) -> tuple[str, str]:
    canonical = canon.canonicalize(text)
    return canonical, canon.split(canonical)[0]


def test_history_filters_over_the_stream(replicas):
    a, b = replicas("a"), replicas("b")
    first = a.add(EntrySpec("domain", "example.com", "court order"), "legal")
    a.add(EntrySpec("host", "other.org", "spam"), "antispam")
    a.define_group("acme", ["example.com"], "tns", "one owner")
    a.add(EntrySpec("org", "acme", "brand abuse"), "legal")
    a.remove(first.id, "appeals", "appeal granted")
    b.refresh()

    def seqs(**kw) -> list[int]:
        return [c["seq"] for c in b.history(ChangeFilter.of(**kw, now=time.time()))]

    assert seqs(host="www.example.com") == [1, 3, 4, 5]
    assert seqs(actor="legal") == [1, 4] and seqs(value="other.org") == [2]
    assert seqs(host="example.com", actor="appeals") == [5]
    assert seqs(start=iso(time.time() + 60)) == []
    assert seqs(start=iso(time.time() - 60), until=iso(time.time() + 60)) == [1, 2, 3, 4, 5]
    removal = b.history(ChangeFilter.of(value="example.com"))[-1]
    assert removal["op"] == "remove" and removal["entry"]["actor"] == "legal"


def test_a_replica_learns_of_gone_entries_from_the_stream_as_it_grows(replicas):
    a, b = replicas("a"), replicas("b")
    now = time.time()
    kept = a.add(EntrySpec("host", "www.example.com", "malware"), "tns")
    gone = a.add(EntrySpec("domain", "example.com", "court order", ("ru",)), "legal")
    short = a.add(EntrySpec("url", "https://www.example.com/a", "dmca",
                            expires_at=now + 0.5), "tns")
    a.remove(gone.id, "appeals", "appeal granted")
    b.refresh()
    (former,) = b.former(*url("https://www.example.com/a"))
    assert former["id"] == gone.id and former["ended"]["actor"] == "appeals"
    assert former["was"].startswith("was banned in RU until ")
    assert b.history_since() == b.changes_since(0, 1)[0]["at"]
    read_to = b._buried_to
    until(lambda: a.sweep() == 1)  # the url ban expired: logged, with its entry
    b.refresh()
    assert [f["id"] for f in b.former(*url("https://www.example.com/a"))] == [short.id,
                                                                              gone.id]
    assert b._buried_to != read_to and len(b.graveyard) == 2  # read on, not again
    assert b.former(*url("https://www.example.com/b")) == [b.former(
        *url("https://www.example.com/a"))[1]]
    assert kept.id not in {f["id"] for f in b.former(*url("https://www.example.com/"))}


def test_an_unreadable_stream_record_is_left_out_and_counted(replicas, redis_server):
    a = replicas("a")
    gone = a.add(EntrySpec("domain", "example.com", "court order"), "legal")
    a.remove(gone.id, "appeals", "appeal granted")
    with redis_server.client() as r:  # a record no writer of ours would produce
        r.xadd("rearrange:{banlist}:history", {"seq": 3, "epoch": a.sync_state().epoch,
                                             "op": "remove", "key": "9", "payload": "{not json",
                                             "actor": "x", "reason": "x"})
    assert [f["id"] for f in a.former(*url("http://example.com/"))] == [gone.id]
    assert a.events.registry.get_sample_value("rearrange_banlist_redis_errors_total",
                                               {"op": "history"}) == 1
    a.former(*url("http://example.com/"))  # read past it: not counted again
    assert a.events.registry.get_sample_value("rearrange_banlist_redis_errors_total",
                                               {"op": "history"}) == 1


STREAM, HISTORY = "rearrange:{banlist}:stream", "rearrange:{banlist}:history"


def test_history_and_former_entries_outlast_the_changelog_and_every_replica(replicas,
                                                                           redis_server):
    a = replicas("a")
    gone = a.add(EntrySpec("domain", "example.com", "court order"), "legal")
    a.remove(gone.id, "appeals", "appeal granted")
    a.add(EntrySpec("host", "other.org", "spam"), "antispam")
    with redis_server.client() as r:  # a quiet week: the changelog's retention took it all
        r.xtrim(STREAM, maxlen=0, approximate=False)
    a.close()
    b = replicas("b")  # a replica started since: no copy, nothing read before
    changes = b.history(ChangeFilter.of(host="example.com", now=time.time()))
    assert [(c["op"], c["seq"], c["actor"]) for c in changes] == [
        ("add", 1, "legal"), ("remove", 2, "appeals")]
    (former,) = b.former(*url("https://www.example.com/"))
    assert former["id"] == gone.id and former["ended"]["reason"] == "appeal granted"
    assert b.history_since() == changes[0]["at"]


def test_a_redis_without_a_history_starts_one_from_its_changelog(replicas, redis_server):
    a = replicas("a")
    gone = a.add(EntrySpec("domain", "example.com", "court order"), "legal")
    a.remove(gone.id, "appeals", "appeal granted")
    a.close()
    with redis_server.client() as r:  # as a Redis written before the history stream
        r.delete(HISTORY)
    b = replicas("b")
    with redis_server.client() as r:
        assert [f["op"] for _, f in r.xrange(HISTORY)] == ["add", "remove"]
        assert r.xrange(HISTORY) == r.xrange(STREAM)  # the same records, the same ids
    b.add(EntrySpec("host", "next.example", "r"), "tns")
    assert [c["seq"] for c in b.history(ChangeFilter.of(now=time.time()))] == [1, 2, 3]


def test_the_first_lookup_reads_back_only_as_far_as_the_graveyard_keeps(replicas,
                                                                        redis_server):
    a = replicas("a")
    a.graveyard.cap = 3
    ids = [a.add(EntrySpec("host", f"h{n}.example", "r"), "tns").id for n in range(6)]
    for entry_id in ids:
        a.remove(entry_id, "tns", "appeal")
    assert [f["value"] for f in a.former(*url("http://h5.example/"))] == ["h5.example"]
    assert len(a.graveyard) == 3 and ids[0] not in a.graveyard.ends  # the oldest not read
    # past the cap the graveyard has none of it: the index of ends answers (test_redis_ends)
    assert [f["value"] for f in a.former(*url("http://h0.example/"))] == ["h0.example"]
    a.remove(a.add(EntrySpec("host", "h9.example", "r"), "tns").id, "tns", "appeal")
    assert [f["value"] for f in a.former(*url("http://h9.example/"))] == ["h9.example"]
