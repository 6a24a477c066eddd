"""The engine's BanIndex against the reference model (the Python index it replaced).

Random entries of every scope, with regions and expiries, in random batches of adds,
removals and group definitions; after each batch both indexes give the same verdict, the
same entry and reason text, and the same explanation for random URLs, and hold the same
entries. The engine applies a batch in one call (`apply`); the reference one change at a
time: the end states must agree.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.banlist import canon
from app.banlist.index import BanIndex
from app.banlist.model import Entry, normalize
from tests.reference.banlist_index import BanIndex as Reference

HOSTS = ["a.com", "www.a.com", "x.y.a.com", "b.org", "1.2.3.4", "c.co.uk", "d.c.co.uk",
         "e.net", "xn--e1afmkfd.xn--p1ai"]
PATHS = ["/", "/p", "/p/", "/p/x", "/p//q/", "/p?q=1", "/q/r?s"]
GROUPS = ["g", "h"]
IDS = [*(str(n) for n in range(1, 25)), "q1", "007", "x-y"]
REGIONS = [None, "DE", "FR", "US"]
TIMES = [1.0, 10.0, 100.0]


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    host = draw(st.sampled_from(HOSTS))
    scope, raw = draw(st.sampled_from([
        ("domain", host), ("host", host), ("url", f"{host}/p?q=1"), ("url", f"{host}/p/x"),
        ("url", f"{host}/"), ("prefix", f"{host}/p/"), ("prefix", f"{host}/p"),
        ("prefix", f"{host}/"), ("prefix", f"{host}/p//q"), ("org", draw(st.sampled_from(GROUPS))),
    ]))
    if scope == "domain" and host == "1.2.3.4":
        scope = "host"
    value = raw if scope == "org" else normalize(scope, raw)
    return Entry(draw(st.sampled_from(IDS)), scope, value,
                 draw(st.sampled_from(["spam", "legal removal", "фишинг"])),
                 draw(st.sampled_from(["tns", "seed"])), draw(st.sampled_from([0.0, 1.5])),
                 draw(st.sampled_from([None, 5.0, 10.0, 50.0])),
                 frozenset(draw(st.sampled_from([(), ("DE",), ("FR", "DE"), ("US",)]))))


changes = st.one_of(
    st.tuples(st.just("add"), entries()),
    st.tuples(st.just("remove"), st.sampled_from(IDS)),
    st.tuples(st.just("group"), st.sampled_from(GROUPS),
              st.lists(st.sampled_from(HOSTS[:4] + ["e.net", "c.co.uk"]), min_size=1,
                       max_size=3, unique=True).map(tuple)),
)


def apply_to_reference(ref: Reference, change: tuple) -> None:
    if change[0] == "add":
        ref.add(change[1])
    elif change[0] == "remove":
        ref.remove(change[1])
    else:
        ref.set_group(change[1], change[2])


def describe(entry: Entry | None) -> str | None:
    return None if entry is None else entry.describe()


def agree(ours: BanIndex, ref: Reference, urls: list[tuple[str, str]]) -> None:
    assert list(ours) == list(ref) and len(ours) == len(ref)
    assert ours.counts == ref.counts and ours.groups == ref.groups
    for now in TIMES:
        assert ours.expired(now) == ref.expired(now)
        assert ours.active_count(now) == ref.active_count(now)
    assert ours.page(None, 5, 10.0) == ref.page(None, 5, 10.0)
    for url, host in urls:
        assert ([(m.entry, m.expression) for m in ours.explain(url, host)]
                == [(m.entry, m.expression) for m in ref.explain(url, host)]), url
        assert ours.domain_keys(host) == ref.domain_keys(host)
        for region in REGIONS:
            for now in TIMES:
                want = ref.match(url, host, region, now)
                got = ours.match(url, host, region, now)
                assert got == want and describe(got) == describe(want), (url, region, now)
                (entry, under), (ref_entry, ref_under) = (
                    ours.host_verdict(host, region, now), ref.host_verdict(host, region, now))
                # "something under this host" comes from the engine's summary, a filter: a
                # saturated count or two names sharing a slot may say yes where nothing is
                # (it only costs a lookup), never no where something is.
                assert entry == ref_entry and (under or not ref_under), (host, region, now)
                assert ours.match_url(url, host, region, now) == ref.match_url(
                    url, host, region, now)


lookups = st.lists(st.tuples(st.sampled_from(HOSTS + ["zz.a.com", "nothing.net"]),
                             st.sampled_from(PATHS)), min_size=1, max_size=12)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=st.dictionaries(st.sampled_from(GROUPS),
                              st.lists(st.sampled_from(HOSTS[:6]), min_size=1, max_size=3,
                                       unique=True).map(tuple), max_size=2),
       batches=st.lists(st.lists(changes, max_size=12), min_size=1, max_size=6),
       probes=lookups)
def test_engine_index_agrees_with_the_reference(groups, batches, probes):
    ours, ref = BanIndex(groups=groups), Reference(groups=groups)
    urls = []
    for host, path in probes:
        url = canon.canonicalize(f"http://{host}{path}")
        urls.append((url, canon.split(url)[0]))
    for batch in batches:
        ours.apply(batch)
        for change in batch:
            apply_to_reference(ref, change)
        agree(ours, ref, urls)
    for entry in list(ref):  # and a removal of everything, one by one, returns each entry
        assert ours.remove(entry.id) == ref.remove(entry.id) == entry
    assert len(ours) == 0 and ours.counts == ref.counts


@settings(max_examples=40, deadline=None)
@given(items=st.lists(entries(), max_size=40), probes=lookups)
def test_a_built_index_agrees_with_one_fed_entry_by_entry(items, probes):
    ref = Reference()
    for entry in items:
        ref.add(entry)
    ours = BanIndex(items)
    urls = [(u := canon.canonicalize(f"http://{h}{p}"), canon.split(u)[0]) for h, p in probes]
    agree(ours, ref, urls)
