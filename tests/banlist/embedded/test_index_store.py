"""Banlist values per scope, the index's matching, and the embedded store's persistence."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading

import pytest

from app.api.errors import status_of
from app.banlist import canon
from app.banlist.embedded.store import EmbeddedStore, EntrySpec
from app.banlist.index import BanIndex
from app.banlist.model import Entry, normalize
from app.errors import BanlistError
from tests.conftest import ROOT


@pytest.mark.parametrize(("scope", "value", "key"), [
    ("url", "HTTPS://News.Example.com:443/a/./b/../c.html#frag", "news.example.com/a/c.html"),
    ("url", "news.example.com/x?id=1", "news.example.com/x?id=1"),
    ("prefix", "Forum.Example.org/leaks/", "forum.example.org/leaks/"),
    ("host", "WWW.Example.COM.", "www.example.com"),
    ("domain", "example.co.uk", "example.co.uk"),
    ("domain", "пример.рф", "xn--e1afmkfd.xn--p1ai"),
    # written as the browser resolves it, so the request path's host is the same key
    ("domain", "i❤.ws", "xn--i-7iq.ws"),
    ("host", "xn--i-7iq.ws", "xn--i-7iq.ws"),
    ("domain", "x_y.ｅｖｉｌ.example", "x_y.evil.example"),
    ("host", "ev\u00adil.example", "evil.example"),
    ("url", "http:/evil.example/a", "evil.example/a"),
    # issue 45: a special scheme's ':' ends it, and the slashes before the host are skipped
    ("host", "http:1572395042/", "93.184.216.34"),
    ("host", "http:///evil.example/", "evil.example"),
    ("domain", "https:\\\\\\evil.example\\", "evil.example"),
    ("url", "http:////evil.example/a", "evil.example/a"),
])
def test_normalize(scope, value, key):
    assert normalize(scope, value) == key


@pytest.mark.parametrize(("scope", "value", "field", "problem"), [
    ("site", "a.com", "scope", "unknown scope"),
    ("host", "a.com/path", "value", "bare host name"),
    ("host", "http:///a.com/x/..", "value", "bare host name"),
    ("domain", "co.uk", "value", "public suffix"),
    ("domain", "github.io", "value", "public suffix"),
    ("prefix", "a.com/x?y=1", "value", "without a query"),
    ("url", "  ", "value", "empty"),
    # accepted before, and never matched anything: what canonicalization keeps escaped
    ("host", "*.wild.example", "value", "not a host name"),
    ("domain", "exa mple.com", "value", "not a host name"),
    ("prefix", "*.x.example/a/", "value", "not a host name"),
    # an IP has no subdomains (the IPv6 one was refused as "a public suffix")
    ("domain", "[2001:db8::1]", "value", "ban it with scope host"),
    ("domain", "10.0.0.1", "value", "ban it with scope host"),
])
def test_normalize_refuses(scope, value, field, problem):
    with pytest.raises(BanlistError) as info:
        normalize(scope, value)
    assert info.value.field == field and problem in info.value.problem


def entry(id, scope, value, **kw):
    return Entry(id, scope, normalize(scope, value), "r", "tns", 0.0, kw.get("expires_at"),
                 frozenset(kw.get("regions", ())))


def check(index, url, region=None, now=1.0):
    c = canon.canonicalize(url)
    found = index.match(c, canon.split(c)[0], region, now)
    return found.id if found else None


def test_index_matches_each_scope():
    index = BanIndex([entry("1", "url", "https://a.com/page?x=1"),
                      entry("2", "prefix", "b.com/forum/"),
                      entry("3", "host", "c.com"),
                      entry("4", "domain", "d.com")])
    assert check(index, "http://a.com/page?x=1") == "1"
    assert check(index, "https://A.com/page?x=1#top") == "1"
    assert check(index, "http://a.com/page?x=2") is None
    assert check(index, "http://b.com/forum/thread/9") == "2"
    assert check(index, "http://b.com/forum") == "2"
    assert check(index, "http://b.com/forums") is None
    assert check(index, "http://c.com/anything") == "3"
    assert check(index, "http://www.c.com/") is None  # host scope: that host only
    assert check(index, "http://d.com/") == "4"
    assert check(index, "http://deep.sub.d.com/x") == "4"
    assert check(index, "http://notd.com/") is None


def test_index_most_specific_first_and_explain():
    index = BanIndex([entry("1", "domain", "e.com"), entry("2", "url", "http://www.e.com/x")])
    assert check(index, "http://www.e.com/x") == "2"
    c = canon.canonicalize("http://www.e.com/x")
    how = [m.expression for m in index.explain(c, "www.e.com")]
    assert how == ["url www.e.com/x", "domain e.com (a parent of www.e.com)"]


def test_host_verdict_is_the_hosts_entry_and_whether_url_entries_lie_under_the_host():
    index = BanIndex([entry("1", "domain", "e.com"), entry("2", "url", "http://www.e.com/x"),
                      entry("3", "prefix", "f.com/a/"),
                      entry("4", "host", "g.com", regions=("DE",))])
    assert index.host_verdict("www.e.com", None, 1.0) == (index.get("1"), True)
    assert index.host_verdict("e.com", None, 1.0) == (index.get("1"), False)
    assert index.host_verdict("f.com", None, 1.0) == (None, True)
    assert index.host_verdict("g.com", "FR", 1.0) == (None, False)
    assert index.host_verdict("g.com", "DE", 1.0) == (index.get("4"), False)
    index.remove("2")  # the per-host cache follows a change
    assert index.host_verdict("www.e.com", None, 1.0) == (index.get("1"), False)


def test_index_remove():
    index = BanIndex([entry("1", "prefix", "b.com/f/"), entry("2", "prefix", "b.com/g/")])
    index.remove("1")
    assert check(index, "http://b.com/f/x") is None and check(index, "http://b.com/g/x") == "2"
    index.remove("2")
    assert len(index) == 0 and check(index, "http://b.com/g/x") is None


def test_store_persists_across_restart(tmp_path):
    path = tmp_path / "banlist.jsonl"
    store = EmbeddedStore(path, clock=lambda: 1000.0)
    kept = store.add(EntrySpec("domain", "bad.com", "spam", ("de",)), "tns")
    gone = store.add(EntrySpec("host", "x.com", "oops"), "tns")
    store.remove(gone.id, "appeals", "appeal granted")
    again = EmbeddedStore(path, clock=lambda: 1000.0)
    assert again.version == 3 and [e.id for e in again.active()] == [kept.id]
    assert again.index.get(kept.id) == kept and kept.regions == frozenset({"DE"})
    assert [c["op"] for c in again.changes_since(0)] == ["add", "add", "remove"]
    assert again.changes_since(2)[0]["actor"] == "appeals"


def test_store_drops_a_torn_last_line_but_refuses_corruption(tmp_path):
    path = tmp_path / "banlist.jsonl"
    store = EmbeddedStore(path)
    store.add(EntrySpec("host", "a.com", "r"), "tns")
    with path.open("a") as fh:
        fh.write('{"seq": 2, "op": "ad')  # a crash mid-write: never acknowledged
    assert EmbeddedStore(path).version == 1
    assert path.read_text().endswith("}\n")
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(BanlistError, match="not valid JSON"):
        EmbeddedStore(path)


def test_store_ttl_and_sweep(tmp_path):
    now = [1000.0]
    store = EmbeddedStore(tmp_path / "b.jsonl", clock=lambda: now[0])
    e = store.add(EntrySpec("host", "t.com", "temporary", expires_at=1010.0), "tns")
    assert check(store.index, "http://t.com/", now=1009.0) == e.id
    assert check(store.index, "http://t.com/", now=1010.0) is None  # expired without a sweep
    now[0] = 1011.0
    assert store.sweep() == 1 and len(store) == 0
    assert json.loads((tmp_path / "b.jsonl").read_text().splitlines()[-1])["op"] == "expire"
    with pytest.raises(BanlistError, match="in the past"):
        store.add(EntrySpec("host", "t.com", "late", expires_at=5.0), "tns")


def test_store_refuses_bad_writes_and_unknown_ids(tmp_path):
    store = EmbeddedStore(None)
    with pytest.raises(BanlistError, match="reason"):
        store.add(EntrySpec("host", "a.com", "  "), "tns")
    with pytest.raises(BanlistError) as info:
        store.remove("42", "tns", "appeal")
    assert status_of(info.value) == 404 and store.version == 0


def test_org_groups_persist_and_entries_follow_membership(tmp_path):
    path = tmp_path / "banlist.jsonl"
    store = EmbeddedStore(path)
    store.define_group("acme", ["acme.com", "Acme-Shop.net"], "tns", "one owner")
    e = store.add(EntrySpec("org", "ACME", "court order"), "legal")
    assert e.value == "acme" and store.index.counts["org"] == 1
    assert check(store.index, "http://www.acme-shop.net/") == e.id
    store.define_group("acme", ["acme.org"], "tns", "moved")
    again = EmbeddedStore(path)
    assert again.index.groups == {"acme": ("acme.org",)} and again.version == 3
    assert check(again.index, "http://acme.com/") is None
    assert check(again.index, "http://x.acme.org/") == e.id
    again.remove(e.id, "tns", "appeal")
    assert check(again.index, "http://x.acme.org/") is None and again.index.counts["org"] == 0
    with pytest.raises(BanlistError, match="group name"):
        again.define_group("no spaces", ["a.com"], "tns", "r")


def test_match_is_the_first_active_candidate_of_explain():
    """The request path's hand-written `match` agrees with `explain` on a random corpus."""
    import random
    rng = random.Random(3)
    hosts = ["a.com", "www.a.com", "x.y.a.com", "b.org", "1.2.3.4", "c.co.uk", "d.c.co.uk"]
    entries, n = [], 0
    for host in hosts:
        for scope, value in (("domain", host), ("host", host), ("url", f"{host}/p?q=1"),
                             ("prefix", f"{host}/p/")):
            if scope == "domain" and host in ("1.2.3.4",):
                continue
            for _ in range(rng.randrange(3)):
                n += 1
                entries.append(Entry(str(n), scope, normalize(scope, value), "r", "t", 0.0,
                                     rng.choice([None, 5.0, 50.0]),
                                     frozenset(rng.choice([(), ("DE",), ("FR", "DE")]))))
    index = BanIndex(entries, {"g": ("a.com", "c.co.uk")})
    index.add(Entry("999", "org", "g", "r", "t", 0.0, None, frozenset({"FR"})))
    for host in hosts + ["zz.a.com", "nothing.net"]:
        for path in ("/", "/p", "/p/", "/p/x", "/p?q=1", "/q"):
            url = canon.canonicalize(f"http://{host}{path}")
            for region in (None, "DE", "FR"):
                for now in (1.0, 10.0, 100.0):
                    want = next((m.entry for m in index.explain(url, host)
                                 if m.entry.active(region, now)), None)
                    assert index.match(url, host, region, now) == want, (url, region, now)


def test_host_verdicts_are_remembered_only_until_the_next_change():
    index = BanIndex()
    assert check(index, "http://www.late.example/") is None  # remembered as clean
    index.add(entry("9", "domain", "late.example"))
    assert check(index, "http://www.late.example/") == "9"  # the change is seen at once
    index.remove("9")
    assert check(index, "http://www.late.example/") is None
    index.add(entry("10", "host", "www.late.example"))
    index.add(entry("11", "domain", "late.example"))
    assert check(index, "http://www.late.example/") == "10"  # most specific first, as before


def test_redefining_a_group_never_shows_members_that_stay_as_unbanned():
    """A batch (a group redefined, many entries added) is published whole: a reader running
    meanwhile sees a.com banned throughout, and the new member only with the whole batch."""
    index = BanIndex(groups={"acme": ("a.com", "b.com")})
    index.add(Entry("1", "org", "acme", "fraud", "tns", 0.0, None, frozenset()))
    batch = [("group", "acme", ("a.com", "b.com", "c.com")),
             *(("add", entry(str(n), "host", f"h{n}.example")) for n in range(2, 150_002))]
    seen: list[tuple[str | None, str | None, int]] = []
    done, reading = threading.Event(), threading.Event()

    def read() -> None:
        while not done.is_set():
            # each call reads the snapshot of its moment: a sample is kept only when the
            # count is the same before and after, i.e. no batch was published in between
            before = len(index)
            sample = (check(index, "http://a.com/"), check(index, "http://c.com/"), len(index))
            if sample[2] == before:
                seen.append(sample)
            reading.set()

    reader = threading.Thread(target=read)
    reader.start()
    reading.wait(10)  # the reader is in its loop before the batch starts, on a busy machine too
    try:
        index.apply(batch)
    finally:
        done.set()
        reader.join()
    assert seen and all(a == "1" for a, _, _ in seen)  # a.com never unbanned mid-update
    assert all((c, n) in (("1", 150_001), (None, 1)) for _, c, n in seen)  # all or nothing
    assert check(index, "http://c.com/") == "1" and len(index) == 150_001


def test_a_reader_never_sees_a_version_whose_change_is_not_applied_yet():
    """Requests read (index, version) without the store's lock and report the version as
    the banlist they were matched on: a version must be published after its change."""
    store = EmbeddedStore(None)
    specs = [EntrySpec("host", f"h{i}.example", "spam") for i in range(20_000)]
    early: list[int] = []
    reads = 0
    writer = threading.Thread(target=store.add_many, args=(specs, "t&s"))
    writer.start()
    while writer.is_alive() or reads == 0:
        index, version = store.index, store.version
        reads += 1
        if version and index.get(str(version)) is None:
            early.append(version)
    writer.join()
    assert store.version == len(specs) and store.index.get(str(len(specs))) is not None
    assert not early, f"{len(early)} of {reads} reads saw a version before its entry"
    store.remove("1", "t&s", "appeal")
    assert store.version == len(specs) + 1 and store.index.get("1") is None


HOLD = """
import sys
from pathlib import Path
from app.banlist.embedded.store import EmbeddedStore
store = EmbeddedStore(Path(sys.argv[1]), read_only=sys.argv[2] == "read-only")
print("holding", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def held(path, mode):
    """Another process holding the log, as a writer or read-only, until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path), mode], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(10)
        holder.stdout.close()


def test_a_log_has_one_writing_process_or_any_number_of_read_only_ones(tmp_path):
    """A second process appending to the same log (a second uvicorn worker) would hand out
    the same seqs: refused at start. Read-only stores share the log, with each other only."""
    path = tmp_path / "banlist.jsonl"
    writer = EmbeddedStore(path)
    writer.add(EntrySpec("host", "a.example", "spam"), "t&s")
    writer.close()
    with held(path, "write") as holder:
        for read_only in (False, True):
            with pytest.raises(BanlistError) as info:
                EmbeddedStore(path, read_only=read_only)
            assert f"in use by pid {holder.pid}" in info.value.problem
            assert "REDIS_URL" in info.value.problem and status_of(info.value) == 503
    with held(path, "read-only"):
        with pytest.raises(BanlistError):
            EmbeddedStore(path)
        frozen = EmbeddedStore(path, read_only=True)
        assert frozen.version == 1 and frozen.index.get("1") is not None
        for write in (lambda: frozen.add(EntrySpec("host", "b.example", "spam"), "t&s"),
                      lambda: frozen.remove("1", "t&s", "appeal"),
                      lambda: frozen.define_group("acme", ["acme.example"], "t&s", "org")):
            with pytest.raises(BanlistError) as info:
                write()
            assert status_of(info.value) == 409 and "read-only" in info.value.problem
        assert frozen.sweep() == 0 and frozen.version == 1
        frozen.close()
    again = EmbeddedStore(path)  # nobody holds it: the log can be owned again
    assert again.version == 1
    again.add(EntrySpec("host", "b.example", "spam"), "t&s")
    assert again.version == 2


def test_a_read_only_store_never_writes_the_log_it_replays(tmp_path):
    """A writable store cuts a torn tail off at start; a read-only one only reads past it."""
    path = tmp_path / "banlist.jsonl"
    store = EmbeddedStore(path)
    store.add(EntrySpec("host", "a.example", "spam"), "t&s")
    store.close()
    with path.open("ab") as fh:
        fh.write(b'{"seq": 2, "op": "add", "ent')  # a crash mid-write
    size = path.stat().st_size
    frozen = EmbeddedStore(path, read_only=True)
    assert frozen.version == 1 and path.stat().st_size == size
    frozen.close()
    assert EmbeddedStore(path).version == 1 and path.stat().st_size < size
