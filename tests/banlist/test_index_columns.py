"""The engine's BanIndex: ids, several entries per key, removals, paging, and matching
against a plain reference that reads every entry."""
from __future__ import annotations

import random

import pytest

from app.banlist import canon
from app.banlist.index import BanIndex
from app.banlist.model import Entry, normalize, url_key

COMPACT_AFTER = 4096  # the reference's compaction threshold: removals well past it


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


def test_many_removals_keep_every_answer():
    n = 3 * COMPACT_AFTER
    index = BanIndex(Entry(str(i), ("host", "domain", "url", "prefix")[i % 4],
                           normalize(("host", "domain", "url", "prefix")[i % 4],
                                     f"s{i}.com/p/" if i % 4 > 1 else f"s{i}.com"),
                           "r", "t", float(i), None, frozenset()) for i in range(1, n + 1))
    kept = [e for e in index if int(e.id) % 5 == 0]
    for i in range(1, n + 1):
        if i % 5:
            index.remove(str(i))
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
    idx = BanIndex([Entry("1", "domain", "example.com", "spam", "tns", 1.0, None,
                          frozenset())])
    giant = "a." * 4000 + "example.com"  # 8 K characters, 4,002 labels
    assert idx.match(f"http://{giant}/", giant, None, 2.0).id == "1"
    assert idx.domain_keys(giant) == ("example.com",)
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



def test_url_and_prefix_answers_follow_changes():
    def ban(id_, scope, value):
        return Entry(id_, scope, normalize(scope, value), "spam", "tns", 1.0, None, frozenset())

    idx = BanIndex([ban("1", "url", "http://u.example/a")])
    url = canon.canonicalize("http://u.example/a")
    assert idx.match(url, "u.example", None, 2.0).id == "1"
    assert idx.host_verdict("u.example", None, 2.0) == (None, True)
    idx.add(ban("2", "prefix", "u.example/a"))
    idx.remove("1")
    assert idx.match(url, "u.example", None, 2.0).id == "2"
    idx.remove("2")
    assert idx.match(url, "u.example", None, 2.0) is None
    assert idx.host_verdict("u.example", None, 2.0) == (None, False)
    idx.add(ban("3", "prefix", "u.example/"))
    long_url = canon.canonicalize("http://u.example/" + "x" * canon.LONGEST_REMEMBERED)
    assert idx.match(long_url, "u.example", None, 2.0).id == "3"
    assert idx.match_url("http://u.example/p1", "u.example", None, 2.0).id == "3"


def test_a_batch_is_applied_in_order_and_published_whole():
    def ban(id_, scope, value):
        return Entry(id_, scope, normalize(scope, value), "spam", "tns", 1.0, None, frozenset())

    idx = BanIndex(groups={"g": ("g.example",)})
    idx.apply([("add", ban("1", "host", "a.example")), ("add", ban("2", "org", "g")),
               ("remove", "1"), ("group", "g", ("h.example",)),
               ("add", ban("1", "domain", "b.example"))])
    assert [e.id for e in idx] == ["2", "1"] and idx.counts["org"] == 1
    assert idx.match("http://x.h.example/", "x.h.example", None, 2.0).id == "2"
    assert idx.match("http://g.example/", "g.example", None, 2.0) is None
    assert idx.match("http://a.example/", "a.example", None, 2.0) is None
    assert idx.groups == {"g": ("h.example",)}
    with pytest.raises(ValueError, match="unknown change"):
        idx.apply([("add", ban("3", "host", "c.example")), ("drop", "1")])
    assert idx.get("3") is None  # a refused batch changes nothing
