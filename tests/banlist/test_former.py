"""The entries that used to match a URL (lookup's `former`), as the embedded store keeps
them: from its removals and sweeps, and from its log at a restart."""
from __future__ import annotations

from pathlib import Path

from app.banlist.embedded.store import EmbeddedStore, EntrySpec
from app.banlist.model import iso
from tests.banlist.history_log import T0, older_log, url, written


def test_former_says_which_entries_matched_and_how_each_ended(history_store):
    store = history_store
    gone = store.former(*url("https://www.example.com/y"))
    assert [(f["id"], f["ended"]["op"]) for f in gone] == [("8", "expire"), ("1", "remove")]
    expired, removed = gone
    assert expired["matched_by"] == "host www.example.com"
    assert expired["was"] == (f"was banned until {iso(T0 + 7 * 60 + 30)}, by antispam, "
                              "reason malware (expired)")
    assert removed["matched_by"] == "domain example.com (a parent of www.example.com)"
    assert removed["was"] == (f"was banned until {iso(T0 + 6 * 60)}, by legal, reason court "
                              "order (removed by appeals: appeal granted)")
    assert removed["ended"] == {"op": "remove", "seq": 7, "at": iso(T0 + 6 * 60),
                                "actor": "appeals", "reason": "appeal granted"}
    # the url ban (2) and the org ban (6) still hold: they are matches, not former ones
    assert store.former(*url("https://shop.example.com/")) == [removed | {
        "matched_by": "domain example.com (a parent of shop.example.com)"}]
    assert store.former(*url("https://other.org/")) == []
    assert store.history_since() == iso(T0)


def test_a_restart_knows_the_same_former_entries(tmp_path: Path):
    first = written(tmp_path / "banlist.jsonl")
    want = first.former(*url("https://www.example.com/y"))
    first.close()
    again = EmbeddedStore(tmp_path / "banlist.jsonl", tail=2)
    assert again.former(*url("https://www.example.com/y")) == want and len(want) == 2
    assert EmbeddedStore(tmp_path / "empty.jsonl").history_since() is None


def test_an_older_log_whose_removals_name_only_the_id(tmp_path: Path):
    store = EmbeddedStore(older_log(tmp_path / "old.jsonl"), tail=1)
    gone = store.former(*url("http://www.a.example/"))
    assert [(f["id"], f["ended"]["op"], f["ended"]["actor"]) for f in gone] == [
        ("3", "expire", "system")]
    assert [f["id"] for f in store.former(*url("http://a.example/"))] == ["3", "1"]


def test_past_the_cap_the_oldest_gone_entries_are_dropped_and_found_in_the_log(tmp_path: Path):
    store = EmbeddedStore(tmp_path / "banlist.jsonl")
    memory = EmbeddedStore(None)
    for kept in (store, memory):
        kept.graveyard.cap = 10
        for i in range(12):
            entry = kept.add(EntrySpec("host", f"h{i}.example", "r"), "tns")
            kept.remove(entry.id, "appeals", "sorry")
            kept.former(*url("http://h0.example/"))  # the graveyard in use from the start
        # past 10 the oldest are dropped down to 9: the first two ended (h0, h1)
        assert len(kept.graveyard) == 10
        assert [f["id"] for f in kept.former(*url("http://h11.example/"))] == ["23"]
    # with a log, `former` reads those dropped from it; without one, they are gone
    (h0,) = store.former(*url("http://h0.example/"))
    removed = store.changes_since(1, 1)[0]
    assert (h0["id"], h0["ended"]["seq"], h0["matched_by"]) == ("1", 2, "host h0.example")
    assert h0["was"] == (f"was banned until {removed['at']}, by tns, reason r (removed by "
                         "appeals: sorry)")
    assert store.history_since() == store.changes_since(0, 1)[0]["at"]  # the whole log
    assert memory.former(*url("http://h0.example/")) == []
    assert memory.history_since() == memory.changes_since(3, 1)[0]["at"]  # h1's removal
