"""A bulk removal on the embedded store: one transaction in the log (a removal a line, each
with its actor and reason), one index batch, and a crash mid-write that takes none of it."""
from __future__ import annotations

import json

import pytest

from app.banlist.embedded import store as store_module
from app.banlist.embedded.store import EmbeddedStore, EntrySpec
from app.banlist.selection import Selection
from app.errors import BanlistError


def campaign(store: EmbeddedStore, n: int = 25) -> None:
    store.add_many([EntrySpec("host", f"h{i}.camp.example", "Campaign 7") for i in range(n)],
                   "alice")
    store.add_many([EntrySpec("host", "keep.example", "court order")], "alice")
    store.add_many([EntrySpec("host", "other.camp.example", "campaign 7")], "bob")


ALICE_7 = Selection(actor="alice", reason_contains="campaign 7")


def test_one_transaction_each_removal_in_the_history_with_actor_and_reason(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr(store_module, "BATCH", 10)  # written in three batches, one commit
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    campaign(store)
    before, digest = store.version, store.index.digest()
    assert store.remove_matching(ALICE_7, "carol", "undo campaign 7") == 25
    assert store.version == store.index.version == before + 25
    assert sorted(e.value for e in store.active()) == ["keep.example", "other.camp.example"]
    lines = [json.loads(x) for x in path.read_text().splitlines()][before:]
    assert [c["op"] for c in lines] == ["remove"] * 25
    assert {c["txn_end"] for c in lines} == {before + 25}  # one transaction: all or nothing
    assert {(c["actor"], c["reason"]) for c in lines} == {("carol", "undo campaign 7")}
    assert sorted(c["entry"]["value"] for c in lines) == sorted(
        f"h{i}.camp.example" for i in range(25))
    assert store.index.digest() != digest and f"{store.digest:032x}" == store.index.digest()
    former = store.former("https://h3.camp.example/", "h3.camp.example")
    assert former[0]["ended"]["actor"] == "carol" and "undo campaign 7" in former[0]["was"]
    again = EmbeddedStore(path)  # replayed as it was written
    assert again.version == before + 25 and again.index.digest() == store.index.digest()
    assert store.remove_matching(ALICE_7, "carol", "again") == 0  # nothing left: no change
    assert store.version == before + 25


def test_a_crash_mid_write_leaves_every_entry_and_the_next_write_goes_on(tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(store_module, "BATCH", 10)
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    campaign(store)
    before, digest = store.version, store.index.digest()
    kept = path.stat().st_size
    store.remove_matching(ALICE_7, "carol", "undo")
    text = path.read_bytes()
    path.write_bytes(text[:kept + (len(text) - kept) // 2])  # the process died halfway
    crashed = EmbeddedStore(path)
    assert crashed.version == before and crashed.index.digest() == digest
    assert len(crashed.active()) == 27 and path.stat().st_size == kept
    assert crashed.remove_matching(ALICE_7, "carol", "undo, again") == 25
    assert EmbeddedStore(path).version == before + 25


def test_a_read_only_store_and_a_blank_reason_are_refused(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    campaign(store, 2)
    with pytest.raises(BanlistError) as blank:
        store.remove_matching(ALICE_7, "carol", "  ")
    assert blank.value.field == "reason"
    store.close()
    with pytest.raises(BanlistError) as refused:
        EmbeddedStore(path, read_only=True).remove_matching(ALICE_7, "carol", "undo")
    assert refused.value.field == "banlist" and "read-only" in refused.value.problem
