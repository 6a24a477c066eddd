"""recovery.py's two decisions, each against a real Redis stream: where a replica's journal
and Redis's changelog part (the branch), and what the lost records come to on the copy
that applied them (the writes that put them back)."""
from __future__ import annotations

import pytest

from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.banlist.redis.recovery import branch, lost_changes

STREAM = "s"


def journal_of(client, n: int) -> list[tuple[int, str, dict[str, str]]]:
    """n records appended to the stream, as a replica's journal holds them."""
    out = []
    for seq in range(1, n + 1):
        fields = {"seq": str(seq), "op": "add", "key": str(seq)}
        out.append((seq, client.xadd(STREAM, fields), fields))
    return out


@pytest.mark.parametrize(("records", "kept"), [(2, 0), (3, 1), (7, 2), (7, 5),
                                               (100, 0), (100, 37), (100, 98), (1000, 511)])
def test_the_branch_is_the_newest_record_redis_still_holds(redis_server, records, kept):
    with redis_server.client() as c:
        journal = journal_of(c, records)
        for _, sid, _ in journal[kept + 1:]:  # Redis lost everything after `kept`
            c.xdel(STREAM, sid)
        assert branch(c, STREAM, journal) == kept


def test_a_branch_cannot_be_told_when_redis_holds_none_or_all(redis_server):
    with redis_server.client() as c:
        journal = journal_of(c, 20)
        assert branch(c, STREAM, journal) is None  # nothing lost
        assert branch(c, STREAM, []) is None
        c.delete(STREAM)
        assert branch(c, STREAM, journal) == -1  # lost past the journal's start


def test_a_seq_rewritten_under_the_same_stream_id_is_not_held(redis_server):
    with redis_server.client() as c:
        journal = journal_of(c, 5)
        c.delete(STREAM)  # the same history to seq 3, then another change at seq 4's id
        for _seq, sid, fields in journal[:3]:
            c.xadd(STREAM, fields, id=sid)
        c.xadd(STREAM, {"seq": "9", "op": "add", "key": "9"}, id=journal[3][1])
        assert branch(c, STREAM, journal) == 2


def entry(entry_id: str, value: str, **kw) -> Entry:
    return Entry(entry_id, "domain", value, "r", "tns", 1.0, kw.get("expires_at"),
                 frozenset(kw.get("regions", ())))


def rec(seq: int, op: str, key: str) -> tuple[int, str, dict[str, str]]:
    return seq, f"{seq}-0", {"seq": str(seq), "op": op, "key": key, "actor": "tns",
                             "reason": f"why {seq}"}


def test_the_lost_records_net_effect_on_the_copy():
    # the copy after seq 9: entries 2 (before the branch) and 7 (lost add) active,
    # 3 removed after the branch, 6 added and removed after it, 4 edited after it
    index = BanIndex([entry("2", "kept.example"), entry("4", "edited.example",
                                                        regions={"RU"}),
                      entry("7", "new.example")], {"g": ("a.example", "b.example")})
    lost = lost_changes([rec(6, "add", "6"), rec(7, "add", "7"), rec(8, "remove", "3"),
                         rec(9, "remove", "6"), rec(10, "edit", "4"),
                         rec(11, "group", "g")], kept_seq=5, index=index, now=2.0)
    assert (lost.first_seq, lost.last_seq, lost.changes) == (6, 11, 6)
    assert [e.id for e in lost.adds] == ["7"]
    assert lost.removes == [("3", "tns", "why 8")]
    assert [(e.id, e.regions, why) for e, _, why in lost.edits] == [
        ("4", frozenset({"RU"}), "why 10")]
    assert lost.groups == [("g", ("a.example", "b.example"), "tns", "why 11")]
    assert lost.unsupported is None


def test_an_expired_add_is_not_written_again_and_a_seed_cannot_be():
    index = BanIndex([entry("7", "gone.example", expires_at=1.5)])
    assert lost_changes([rec(7, "add", "7")], kept_seq=6, index=index, now=2.0).adds == []
    seeded = lost_changes([rec(7, "add", "7"), rec(8, "seed", "100")], 6, index, 2.0)
    assert seeded.unsupported == "a seed is among the changes Redis lost"
