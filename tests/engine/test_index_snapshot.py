"""`BanIndex.dump`, `BanIndex.load` and `BanIndex.digest` (issue 44, snapshots) against
Python: the digest against `app.banlist.digest` (the reference the stores and Redis's
scripts keep: orjson's bytes, `model.iso`'s times, SHA-1), on random entries whose
strings need every kind of escape and whose times sit on millisecond and microsecond
ties; a dump loaded back holds the same entries, groups and digest, and gives back its
meta; a malformed dump is a ValueError naming the byte at fault.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.banlist.digest import EMPTY, Digest
from app.banlist.index import BanIndex
from app.banlist.model import Entry

SCOPES = ("url", "prefix", "host", "domain", "org")
# Python's datetime holds the years 1 to 9999: `model.iso` has no other
FIRST, LAST = -62_135_596_800.0, 253_402_300_799.0

# text of every kind: control characters, quotes, backslashes, non-BMP, DEL, U+2028
AWKWARD = "\x00\x01\x08\t\n\x0b\x0c\r\x1f\"\\/\x7f\u2028é\U0001F600"
texts = st.text(
    alphabet=st.one_of(st.sampled_from(AWKWARD), st.characters(codec="utf-8")),
    max_size=12,
)


def near_ties() -> st.SearchStrategy[float]:
    """Times on and a hair off a millisecond or a microsecond: where rounding the
    microseconds half to even and cutting to milliseconds decide the text."""
    base = st.sampled_from([1.7e9, 0.0, -1.0, 1e9, 253_402_300_798.0, -62_135_596_799.0])
    unit = st.sampled_from([1e-3, 1e-6, 5e-7, 5e-4])
    k = st.integers(-3000, 3000)
    shift = st.sampled_from([0.0, 1e-7, -1e-7, 1e-9, -1e-9, 4.9e-7, -4.9e-7])
    ulps = st.integers(-2, 2)

    def make(b: float, u: float, n: int, s: float, steps: int) -> float:
        t = b + n * u + s
        for _ in range(abs(steps)):
            t = math.nextafter(t, math.inf if steps > 0 else -math.inf)
        return min(max(t, FIRST), LAST)

    return st.builds(make, base, unit, k, shift, ulps)


times = st.one_of(near_ties(), st.floats(min_value=FIRST, max_value=LAST))
# numbers (the stores' ids), and text: a leading zero, past 18 digits, anything else
ids = st.one_of(
    st.integers(0, 10**18 - 1).map(str),
    st.integers(0, 999).map(lambda n: f"0{n}"),
    st.integers(10**18, 10**30).map(str),
    texts,
)
entries = st.builds(
    Entry,
    id=ids,
    scope=st.sampled_from(SCOPES),
    value=texts,
    reason=texts,
    actor=texts,
    created_at=times,
    expires_at=st.one_of(st.none(), times),
    regions=st.frozensets(texts, max_size=3),
)
groups = st.dictionaries(texts, st.lists(texts, max_size=4).map(tuple), max_size=3)


def python_digest(index: BanIndex) -> str:
    return Digest.of(index, index.groups).hex


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(entries, max_size=20), groups)
def test_the_digest_is_pythons(listed: list[Entry], defined: dict[str, tuple[str, ...]]) -> None:
    index = BanIndex(listed, defined)
    assert index.digest() == python_digest(index)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(near_ties(), min_size=1, max_size=10), ids)
def test_times_on_ties_hash_as_python_writes_them(ts: list[float], entry_id: str) -> None:
    # one entry a time: each digest is one entry's SHA-1, so equal digests mean its
    # payload's bytes are Python's, times included
    for created in ts:
        index = BanIndex([Entry(entry_id, "host", "h.example", "r", "a", created, created,
                                frozenset())])
        assert index.digest() == python_digest(index), repr(created)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(entries, max_size=30), groups, st.data(), st.binary(max_size=40))
def test_a_dump_loads_back_whole(listed: list[Entry], defined: dict[str, tuple[str, ...]],
                                 data: st.DataObject, meta: bytes) -> None:
    index = BanIndex(listed, defined)
    # some entries removed, a group redefined: what a live index has been through
    for entry in data.draw(st.lists(st.sampled_from(listed), max_size=5)) if listed else ():
        index.remove(entry.id)
    if defined:
        index.set_group(next(iter(defined)), data.draw(st.lists(texts, max_size=3)))
    loaded, got_meta, digest = BanIndex.load(index.dump(meta))
    assert got_meta == meta
    assert list(loaded) == list(index)
    assert loaded.groups == index.groups
    assert loaded.counts == index.counts
    assert digest == loaded.digest() == index.digest() == python_digest(index)
    # the loaded index takes changes as the original does
    extra = Entry("new", "domain", "x.example", "r", "a", 1.7e9, None, frozenset())
    for i in (index, loaded):
        i.add(extra)
    assert list(loaded) == list(index)
    assert loaded.match("http://www.x.example/", "www.x.example", None, 1.8e9) == extra


def test_an_empty_index_dumps_and_loads() -> None:
    loaded, meta, digest = BanIndex.load(BanIndex().dump(b""))
    assert (len(loaded), meta, digest, loaded.groups) == (0, b"", EMPTY, {})


def test_a_malformed_dump_is_a_value_error_naming_the_byte() -> None:
    index = BanIndex([Entry("1", "domain", "a.example", "r", "a", 1.7e9, None,
                            frozenset({"DE"}))], {"g": ("b.example",)})
    good = index.dump(b'{"version": 1}')
    with pytest.raises(ValueError, match=r"its magic is not RRBANIDX\) at byte 0"):
        BanIndex.load(b"X" + good[1:])
    with pytest.raises(ValueError, match=r"truncated: .* at byte \d+"):
        BanIndex.load(good[:-1])
    with pytest.raises(ValueError, match=rf"1 trailing bytes at byte {len(good)}$"):
        BanIndex.load(good + b"\0")
    value = good.rindex(b"a.example")
    with pytest.raises(ValueError, match=rf"bad UTF-8 at byte {value}$"):
        BanIndex.load(good[:value] + b"\xff" + good[value + 1:])
    # every cut of the dump is refused
    for cut in range(0, len(good), 97):
        with pytest.raises(ValueError, match="at byte"):
            BanIndex.load(good[:cut])
