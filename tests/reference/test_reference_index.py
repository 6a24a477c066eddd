"""The reference model's own structures (the Python index the Rust BanIndex replaced).

Its hash tables, id parsing and per-host/URL caches are what the reference is built of;
they are tested here so the reference stays trustworthy as the model the engine's index
is property-tested against (tests/banlist/test_index_property.py).
"""
from __future__ import annotations

from array import array

import pytest

from app.banlist import canon
from app.banlist.model import Entry, normalize
from tests.reference import banlist_index as index_module
from tests.reference.banlist_columns import SALT, numeric_id
from tests.reference.banlist_index import BanIndex
from tests.reference.banlist_table import EMPTY, TOMB, HashBag, RowTable


def test_row_table_keeps_every_row_of_a_hash_in_order_through_tombstones_and_growth():
    hashes = array("q", [5, 5, 13, 5, 21, 7])  # 5, 13, 21 share a home slot in 8 slots
    table = RowTable()
    assert len(table.slots) == 8
    for row in range(4):
        table.insert(hashes[row], row, hashes)
    assert table.find(5, hashes) == [0, 1, 3] and table.find(13, hashes) == [2]
    assert table.find(29, hashes) == []  # same home slot, no row: walks the cluster, finds none
    assert table.delete(5, 1) and not table.delete(5, 1)
    assert TOMB in table.slots and table.find(5, hashes) == [0, 3]
    assert table.find(13, hashes) == [2]  # found past the tombstone
    table.insert(21, 4, hashes)  # reuses the tombstone: order still comes out by row
    table.insert(7, 5, hashes)
    assert table.find(5, hashes) == [0, 3] and table.find(21, hashes) == [4]
    grown = array("q", list(hashes) + [5] * 20)
    for row in range(6, 26):
        table.insert(5, row, grown)
    assert len(table.slots) > 8 and TOMB not in table.slots  # rebuilt, tombstones dropped
    assert table.find(5, grown) == [0, 3, *range(6, 26)]
    assert table.find(13, grown) == [2] and table.find(7, grown) == [5]
    assert table.live == 25 and table.slots.count(EMPTY) == len(table.slots) - 25


def test_row_table_spreads_consecutive_ids():
    ids = array("q", range(1000))
    table = RowTable(spread=True)
    for row in range(1000):
        table.insert(row, row, ids)
    for row in range(0, 1000, 2):
        table.delete(row, row)
    assert all(table.find(n, ids) == ([n] if n < 1000 and n % 2 else []) for n in range(1100))
    # no long runs: consecutive ids do not sit in consecutive slots
    runs, run = [], 0
    for slot in table.slots:
        run = run + 1 if slot != EMPTY else 0
        runs.append(run)
    assert max(runs) < 40


def test_hash_bag_counts_multiplicity():
    bag = HashBag()
    for h in (3, 3, 11, 0, -7):
        bag.add(h)
    assert 3 in bag and 11 in bag and 0 in bag and -7 in bag and 19 not in bag
    bag.discard(3)
    assert 3 in bag
    bag.discard(3)
    assert 3 not in bag and 11 in bag
    for h in range(100, 200):
        bag.add(h)
    assert all(h in bag for h in range(100, 200)) and 11 in bag and 250 not in bag


def test_a_hash_collision_never_bans_the_other_key():
    """A row stored under clean.com's hash but holding another value does not match it."""
    index = BanIndex([Entry("1", "domain", "evil.com", "r", "t", 0.0, None, frozenset())])
    cols = index._cols
    forged = hash("clean.com") ^ SALT["domain"]
    row = cols.put("2", ("domain", "r", "t", frozenset()), b"other.com", forged, 0.0, 1e300)
    cols.publish(row, "2", "domain", "other.com", ())
    assert cols.keys.find(forged, cols.khash) == [row]  # the probe does find it...
    assert cols.rows_for("domain", "clean.com") == []  # ...and the check refuses it
    assert index.match("http://clean.com/", "clean.com", None, 1.0) is None
    assert index.match("http://evil.com/", "evil.com", None, 1.0).id == "1"


@pytest.mark.parametrize(("text", "number"), [
    ("42", 42), ("0", 0), ("042", -1), ("q1", -1), ("", -1), ("-5", -1), ("٣", -1),
    ("9" * 19, -1), ("1" * 18, int("1" * 18)),
])
def test_numeric_ids(text, number):
    assert numeric_id(text) == number


def test_remembered_url_candidates_follow_changes_and_stay_bounded(monkeypatch):
    def ban(id_, scope, value):
        return Entry(id_, scope, normalize(scope, value), "spam", "tns", 1.0, None, frozenset())

    idx = BanIndex([ban("1", "url", "http://u.example/a")])
    url = canon.canonicalize("http://u.example/a")
    assert idx.match(url, "u.example", None, 2.0).id == "1"
    assert url in idx._by_url
    idx.add(ban("2", "prefix", "u.example/a"))
    idx.remove("1")  # each change makes what was remembered stale
    assert idx.match(url, "u.example", None, 2.0).id == "2"
    idx.remove("2")
    assert idx.match(url, "u.example", None, 2.0) is None
    idx.add(ban("3", "prefix", "u.example/"))
    long_url = canon.canonicalize("http://u.example/" + "x" * canon.LONGEST_REMEMBERED)
    assert idx.match(long_url, "u.example", None, 2.0).id == "3"
    assert long_url not in idx._by_url
    monkeypatch.setattr(index_module, "URL_CACHE", 8)
    for i in range(20):
        assert idx.match(f"http://u.example/p{i}", "u.example", None, 2.0).id == "3"
        assert len(idx._by_url) <= 8
    # a client picks its URLs: what is held is bounded in characters too
    monkeypatch.setattr(index_module, "URL_CACHE_CHARS", 5000)
    for i in range(20):
        assert idx.match(f"http://u.example/{i}/" + "y" * 2000, "u.example", None, 2.0).id == "3"
        assert sum(map(len, idx._by_url)) <= 5000 + 2048


def test_a_change_landing_while_a_url_is_matched_is_not_remembered_as_current():
    # The replica thread adds a prefix ban between match_url's look at the host (which then
    # had only a url entry) and its look-up of the URL (here: when the URL is hashed for
    # it). The answer computed from the host's old flags must not outlive the change.
    def ban(id_, scope, value):
        return Entry(id_, scope, normalize(scope, value), "spam", "tns", 1.0, None, frozenset())

    idx = BanIndex([ban("1", "url", "http://h.example/other")])
    url = canon.canonicalize("http://h.example/leak/1")

    class Url(str):  # hashed by match_url's URL look-up: the change lands right then
        fired = False

        def __hash__(self) -> int:
            if not Url.fired:
                Url.fired = True
                idx.add(ban("2", "prefix", "h.example/leak/"))
            return str.__hash__(self)

    idx.match_url(Url(url), "h.example", None, 2.0)
    assert Url.fired
    assert idx.match(url, "h.example", None, 2.0).id == "2"
