"""The columnar index: its hash tables, and BanIndex against a plain reference."""
from __future__ import annotations

import random
from array import array

import pytest

from app.banlist import canon
from app.banlist.columns import SALT, numeric_id
from app.banlist.index import COMPACT_AFTER, BanIndex
from app.banlist.model import Entry, normalize, url_key
from app.banlist.table import EMPTY, TOMB, HashBag, RowTable


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


def test_ids_that_are_not_plain_numbers_work_like_any_other():
    ids = ["q1", "042", "42", "abc", "9" * 25, "7"]
    index = BanIndex(Entry(i, "host", f"h{n}.com", "r", "t", 0.0, None, frozenset())
                     for n, i in enumerate(ids))
    assert [e.id for e in index] == ids and len(index) == 6
    assert index.get("042").value == "h1.com" and index.get("42").value == "h2.com"
    index.add(Entry("042", "host", "moved.com", "r", "t", 0.0, None, frozenset()))
    assert index.get("042").value == "moved.com" and index.by_value("host", "h1.com") == ()
    assert index.remove("q1").value == "h0.com" and index.get("q1") is None
    assert index.match("http://moved.com/", "moved.com", None, 1.0).id == "042"
    page, more = index.page(None, 3, 1.0)
    assert [e.id for e in page] == ["7", "42", "042"] and more  # numbers, then by string
    page, more = index.page("042", 3, 1.0)
    assert [e.id for e in page] == ["9" * 25, "abc"] and not more


def test_several_entries_on_one_key_regions_and_expiry():
    def e(i, regions=(), expires=None):
        return Entry(i, "domain", "shop.com", "r", "t", 0.0, expires, frozenset(regions))
    index = BanIndex([e("1", ("DE",)), e("2", (), 5.0), e("3", ("FR", "DE"))])
    url, host = "http://www.shop.com/", "www.shop.com"
    assert [m.entry.id for m in index.explain(url, host)] == ["1", "2", "3"]
    assert index.match(url, host, "DE", 1.0).id == "1"
    assert index.match(url, host, "FR", 1.0).id == "2"
    assert index.match(url, host, "FR", 5.0).id == "3"  # 2 expired at 5.0 exactly
    assert index.match(url, host, "US", 5.0) is None
    assert [x.id for x in index.expired(5.0)] == ["2"] and index.expired(4.9) == []
    assert index.active_count(5.0) == 2 and index.active_count(1.0) == 3
    index.remove("2")
    assert index.expired(10.0) == [] and index.by_value("domain", "shop.com") == (
        e("1", ("DE",)), e("3", ("FR", "DE")))
    assert index.get("3") == e("3", ("FR", "DE"))  # made again, equal to what went in


def test_removals_compact_the_columns_and_keep_every_answer():
    n = 3 * COMPACT_AFTER
    index = BanIndex(Entry(str(i), ("host", "domain", "url", "prefix")[i % 4],
                           normalize(("host", "domain", "url", "prefix")[i % 4],
                                     f"s{i}.com/p/" if i % 4 > 1 else f"s{i}.com"),
                           "r", "t", float(i), None, frozenset()) for i in range(1, n + 1))
    first = index._cols
    kept = [e for e in index if int(e.id) % 5 == 0]
    for i in range(1, n + 1):
        if i % 5:
            index.remove(str(i))
    assert index._cols is not first  # compacted into new columns (more dead rows than live)
    assert index._cols.dead < COMPACT_AFTER
    assert list(index) == kept and len(index) == len(kept)
    assert sum(index.counts.values()) == len(kept)
    for entry in kept:
        assert index.get(entry.id) == entry
        host = entry.value.split("/")[0]
        url = f"http://{entry.value}" if entry.scope in ("url", "prefix") else f"http://{host}/"
        if entry.scope == "prefix":
            url += "x"
        assert index.match(canon.canonicalize(url), host, None, 1.0) == entry
    assert index.get("1") is None and index.match("http://s1.com/", "s1.com", None, 1.0) is None


def test_paging_falls_back_to_a_scan_over_wide_gaps():
    ids = [*range(1, 11), *range(5000, 5011)]
    index = BanIndex(Entry(str(i), "host", f"h{i}.com", "r", "t", 0.0,
                           3.0 if i == 5001 else None, frozenset()) for i in ids)
    seen, after = [], None
    while True:
        page, more = index.page(after, 4, 2.0)
        seen += [int(e.id) for e in page]
        if not more:
            break
        after = page[-1].id
    assert seen == ids
    page, more = index.page("10", 3, 5.0)  # 5001 expired by then
    assert [e.id for e in page] == ["5000", "5002", "5003"] and more


# ---- a randomized comparison with a plain reference ----------------------------------------

HOSTS = ["a.com", "www.a.com", "x.y.a.com", "b.org", "1.2.3.4", "c.co.uk", "d.c.co.uk",
         "e.net"]


def reference_candidates(entries: dict[str, Entry], groups: dict[str, tuple[str, ...]],
                         canonical: str, host: str) -> list[tuple[Entry, str]]:
    """What covers the URL, by reading every entry: the order BanIndex documents."""
    live = list(entries.values())
    key = url_key(canonical)
    out = [(e, f"url {key}") for e in live if e.scope == "url" and e.value == key]
    _, path, _ = canon.split(canonical)
    for k in dict.fromkeys(host + p.rstrip("/") for p in reversed(canon.path_prefixes(path))):
        out += [(e, f"prefix {e.value} covers path {path}") for e in live
                if e.scope == "prefix" and e.value.rstrip("/") == k]
    out += [(e, f"host {host}") for e in live if e.scope == "host" and e.value == host]
    for suffix in canon.host_suffixes(host):
        how = "the domain itself" if suffix == host else f"a parent of {host}"
        out += [(e, f"domain {suffix} ({how})") for e in live
                if e.scope == "domain" and e.value == suffix]
        out += [(e, f"org {e.value}: member domain {suffix} ({how})") for e in live
                if e.scope == "org" and suffix in groups.get(e.value, ())]
    return out


def random_entry(rng: random.Random, entry_id: str) -> Entry:
    host = rng.choice(HOSTS)
    scope, value = rng.choice([("domain", host), ("host", host), ("url", f"{host}/p?q=1"),
                               ("url", f"{host}/p/x"), ("prefix", f"{host}/p/"),
                               ("prefix", f"{host}/p"), ("org", rng.choice("gh"))])
    if scope == "domain" and host == "1.2.3.4":
        scope = "host"
    if scope != "org":
        value = normalize(scope, value)
    return Entry(entry_id, scope, value, rng.choice(["spam", "legal"]), "t", 0.0,
                 rng.choice([None, 5.0, 50.0]),
                 frozenset(rng.choice([(), ("DE",), ("FR", "DE")])))


@pytest.mark.parametrize("seed", range(6))
def test_match_explain_and_expiry_agree_with_a_plain_reference(seed):
    rng = random.Random(seed)
    groups = {"g": ("a.com", "c.co.uk"), "h": ("b.org",)}
    index, entries = BanIndex(groups=groups), {}
    ids = [str(i) for i in range(1, 60)] + ["q1", "007", "x-y"]
    for step in range(600):
        roll = rng.random()
        entry_id = rng.choice(ids)
        if roll < 0.55:
            entry = random_entry(rng, entry_id)
            index.add(entry)
            entries.pop(entry_id, None)
            entries[entry_id] = entry
        elif roll < 0.9:
            assert index.remove(entry_id) == entries.pop(entry_id, None)
        else:
            name = rng.choice("gh")
            groups[name] = tuple(rng.sample(HOSTS[:4] + ["e.net"], rng.randrange(1, 4)))
            index.set_group(name, groups[name])
        if step % 25:
            continue
        assert list(index) == list(entries.values()) and len(index) == len(entries)
        for now in (1.0, 10.0, 100.0):
            assert index.expired(now) == [e for e in entries.values()
                                          if e.expires_at is not None and e.expires_at <= now]
        for host in HOSTS + ["zz.a.com", "nothing.net"]:
            for path in ("/", "/p", "/p/", "/p/x", "/p?q=1", "/q"):
                url = canon.canonicalize(f"http://{host}{path}")
                want = reference_candidates(entries, groups, url, host)
                got = [(m.entry, m.expression) for m in index.explain(url, host)]
                assert got == want, (url, step)
                for region in (None, "DE", "FR"):
                    for now in (1.0, 10.0, 100.0):
                        first = next((e for e, _ in want if e.active(region, now)), None)
                        assert index.match(url, host, region, now) == first, (url, region, now)


def test_a_giant_host_is_matched_without_keeping_it_or_building_every_parent():
    from app.banlist import index as index_module

    idx = BanIndex([Entry("1", "domain", "example.com", "spam", "tns", 1.0, None,
                          frozenset())])
    giant = "a." * 4000 + "example.com"  # 8 K characters, 4,002 labels
    assert idx.match(f"http://{giant}/", giant, None, 2.0).id == "1"
    assert index_module._suffixes(giant, idx._labels) == ("example.com",)
    assert giant not in idx._by_host
    clean = "a." * 4000 + "example.org"
    assert idx.match(f"http://{clean}/", clean, None, 2.0) is None


def test_parents_are_probed_up_to_the_longest_domain_or_org_member():
    idx = BanIndex([Entry("1", "domain", "shop.example.co.uk", "spam", "tns", 1.0, None,
                          frozenset())])
    host = "www.a.shop.example.co.uk"
    assert idx.match(f"http://{host}/", host, None, 2.0).id == "1"
    # a group with a longer member widens the walk for every host
    idx.set_group("acme", ("x.y.z.acme.example.com",))
    idx.add(Entry("2", "org", "acme", "legal", "tns", 1.0, None, frozenset()))
    deep = "p.q.x.y.z.acme.example.com"
    assert idx.match(f"http://{deep}/", deep, None, 2.0).id == "2"
    assert [m.entry.id for m in idx.explain(f"http://{deep}/", deep)] == ["2"]


def test_remembered_url_candidates_follow_changes_and_stay_bounded(monkeypatch):
    from app.banlist import index as index_module

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
