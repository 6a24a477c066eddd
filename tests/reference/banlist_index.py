"""Reference model: the Python banlist index that the Rust `BanIndex` replaced.

O(1) per scope, O(labels) for domains, O(segments) for prefixes.

Entries live as columns (`columns.Columns`): arrays and one value blob, found through
open-addressing tables of row numbers (`table.RowTable`). No Python object exists per
entry, so the garbage collector has nothing per entry to walk and an entry costs ~100 bytes
instead of ~400; `Entry` objects are made on demand (a hit, `get`, iteration, `explain`).
"""
from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable, Iterator
from functools import lru_cache

from app.banlist import canon
from app.banlist.model import SCOPES, Entry, Match, url_key
from tests.reference.banlist_columns import NO_EXPIRY, SALT, Columns, key_of, numeric_id, unlink_org
from tests.reference.banlist_columns import link_org as _link

HOST_CACHE = 65_536  # hosts whose covering entries are remembered between changes
HAS_URL, HAS_PREFIX = 1, 2
# (generation, the host/domain/org entries covering the host, HAS_URL | HAS_PREFIX)
HostInfo = tuple[int, tuple[Entry, ...], int]
# URLs (on hosts with url or prefix entries) whose candidate entries are remembered: few
# URLs have any, so this stays small. Bounded by count and by characters held (a client
# chooses its URLs), and URLs past canon.LONGEST_REMEMBERED are never kept.
URL_CACHE = 16_384
URL_CACHE_CHARS = 1_000_000
COMPACT_AFTER = 4096  # dead rows tolerated before compaction is considered (then: > live)


class BanIndex:
    """Entries keyed by what they match, in columns: no per-entry object for the GC to walk.

    A writer changes one index at a time (the stores hold a lock); readers run concurrently
    and never lock: a row is written before any table points at it, a removal marks the row
    dead before unlinking it, and a compaction builds new columns aside and swaps one
    reference, so a reader that took `_cols` finishes on a consistent copy.
    """

    __slots__ = ("_cols", "groups", "counts", "_generation", "_by_host", "_by_url",
                 "_url_chars", "_labels")

    def __init__(self, entries: Iterable[Entry] = (),
                 groups: dict[str, tuple[str, ...]] | None = None) -> None:
        self._cols = Columns()
        self.groups: dict[str, tuple[str, ...]] = dict(groups or {})  # org name -> its domains
        self.counts: dict[str, int] = dict.fromkeys(SCOPES, 0)
        # The most labels any domain entry or org member has (it only grows): a host's
        # parents with more labels cannot be banned, so they are never built or probed
        # (a host may be 8 K characters of `a.a.a…`; its every parent would be megabytes).
        self._labels = 1
        for domains in self.groups.values():
            self._count_labels(domains)
        # host -> (generation, the host/domain/org entries that cover it, most specific
        # first, whether url/prefix entries exist under it): hosts repeat across pages, so
        # the suffix walk is done once per host until the next change, and a URL on a host
        # without url or prefix entries costs one dict probe. A change bumps the generation
        # once it is complete, so an answer computed while it was being applied is never
        # reused after it.
        self._generation = 0
        self._by_host: dict[str, HostInfo] = {}
        # canonical URL -> (generation, its url entries, then its prefix entries most
        # specific first): the same stamp, for URLs on hosts that have such entries.
        self._by_url: dict[str, tuple[int, tuple[Entry, ...]]] = {}
        self._url_chars = 0
        for entry in entries:
            self.add(entry)

    def set_group(self, name: str, domains: tuple[str, ...]) -> None:
        """Define or redefine an org group; entries banning it follow the new members.

        The member table is rebuilt aside and swapped in one reference, so a request never
        sees the group half moved (members that stay in it briefly unbanned).
        """
        cols = self._cols
        banned = [row for row in cols.org_rows if cols.value(row) == name]
        orgs = dict(cols.orgs)
        for row in banned:
            unlink_org(orgs, self.groups.get(name, ()), row)
        for row in banned:
            _link(orgs, domains, row)
        self.groups[name] = domains
        self._count_labels(domains)
        cols.orgs = orgs
        self._changed()

    def _count_labels(self, domains: Iterable[str]) -> None:
        self._labels = max((self._labels, *(d.count(".") + 1 for d in domains)))

    def __len__(self) -> int:
        cols = self._cols
        return cols.n - cols.dead

    def __iter__(self) -> Iterator[Entry]:
        """Every entry, oldest first (made one at a time, never all at once)."""
        cols = self._cols
        meta_id = cols.meta_id
        for row in range(cols.n):
            if meta_id[row]:
                entry = cols.entry(row)
                if entry is not None:
                    yield entry

    def frozen(self) -> Iterator[Entry]:
        """Every entry as of this call, made one at a time while writers go on.

        Rows are append-only and a live row never changes; a removal only marks its
        `meta_id`. So the row count and a copy of that one column (4 bytes a row) pin this
        moment: rows appended later and removals made later are not seen. A compaction
        swaps in new columns and leaves these as they are.
        """
        cols = self._cols
        n = cols.n
        alive = cols.meta_id[:n]  # array slice: a copy
        return _pinned(cols, n, alive)

    def get(self, entry_id: str) -> Entry | None:
        cols = self._cols
        row = cols.row_of(entry_id)
        return None if row is None else cols.entry(row)

    def by_value(self, scope: str, value: str) -> tuple[Entry, ...]:
        """Every entry written for exactly this scope and value (e.g. a host's sanctions)."""
        cols = self._cols
        if scope == "org":
            rows = [row for row in cols.org_rows if cols.value(row) == value]
        else:
            rows = [row for row in cols.rows_for(scope, key_of(scope, value))
                    if cols.value(row) == value]
        return tuple(_entries(cols, rows))

    def add(self, entry: Entry) -> None:
        """Index an entry (replacing one with the same id)."""
        if self._cols.row_of(entry.id) is not None:
            self.remove(entry.id)
        cols, scope = self._cols, entry.scope
        key = key_of(scope, entry.value)
        expires = NO_EXPIRY if entry.expires_at is None else entry.expires_at
        row = cols.put(entry.id, (scope, entry.reason, entry.actor, entry.regions),
                       entry.value.encode(), 0 if scope == "org" else hash(key) ^ SALT[scope],
                       entry.created_at, expires)
        if scope == "domain":
            self._count_labels((entry.value,))
        cols.publish(row, entry.id, scope, key, self._members(entry))
        self.counts[scope] += 1
        self._changed()

    def remove(self, entry_id: str) -> Entry | None:
        """Drop an entry by id; returns it, or None if it was not there."""
        cols = self._cols
        row = cols.row_of(entry_id)
        entry = None if row is None else cols.entry(row)
        if row is None or entry is None:
            return None
        cols.unpublish(row, entry_id, entry.scope, key_of(entry.scope, entry.value),
                       self._members(entry))
        self.counts[entry.scope] -= 1
        if cols.dead > COMPACT_AFTER and cols.dead > cols.n - cols.dead:
            self._cols = cols.compacted(self.groups)  # built aside, swapped in one reference
        self._changed()
        return entry

    def _members(self, entry: Entry) -> tuple[str, ...]:
        return self.groups.get(entry.value, ()) if entry.scope == "org" else ()

    def expired(self, now: float) -> list[Entry]:
        """Entries expired at `now`, from the expiry column (cheap when few entries expire)."""
        cols = self._cols
        expires, meta_id, out = cols.expires, cols.meta_id, []
        for row in cols.expiring:
            if expires[row] <= now and meta_id[row]:
                entry = cols.entry(row)
                if entry is not None:
                    out.append(entry)
        return out

    def page(self, after: str | None, limit: int, now: float) -> tuple[list[Entry], bool]:
        """Up to `limit` unexpired entries after id `after`, and whether more follow.

        Id order: numeric ids by number, then any other ids by string. Numeric ids are the
        stores' sequence numbers, so the next ones are probed by number (gaps are removals);
        only when gaps are many does it fall back to one pass over the id column.
        """
        cols = self._cols
        want = limit + 1
        number = -1 if after is None else numeric_id(after)
        rows = self._numbered(cols, number, want, now) if after is None or number >= 0 else []
        if len(rows) < want:
            names = sorted(name for name, row in cols.named.items()
                           if (after is None or number >= 0 or name > after)
                           and not cols.expires[row] <= now)
            rows += [cols.named[name] for name in names[:want - len(rows)]]
        entries = list(_entries(cols, rows))
        return entries[:limit], len(entries) > limit

    @staticmethod
    def _numbered(cols: Columns, after: int, want: int, now: float) -> list[int]:
        ids, expires, meta_id, by_id = cols.ids, cols.expires, cols.meta_id, cols.by_id
        rows: list[int] = []
        number, budget = after + 1, 8 * want + 1024
        while number <= cols.max_id and len(rows) < want and budget:
            found = by_id.find(number, ids)
            if found and not expires[found[0]] <= now:
                rows.append(found[0])
            number, budget = number + 1, budget - 1
        if budget:
            return rows
        wanted = heapq.nsmallest(want, (ids[row] for row in range(cols.n) if ids[row] > after
                                        and meta_id[row] and not expires[row] <= now))
        return [found[0] for n in wanted if (found := by_id.find(n, ids))]

    def active_count(self, now: float) -> int:
        """How many entries are unexpired at `now` (expired ones await the sweeper)."""
        cols = self._cols
        expires, meta_id = cols.expires, cols.meta_id
        gone = sum(1 for row in cols.expiring if expires[row] <= now and meta_id[row])
        return len(self) - gone

    def match(self, canonical: str, host: str, region: str | None, now: float) -> Entry | None:
        """The most specific active entry for a canonical URL (url, prefix, host, domain, org)."""
        entry = self.match_url(canonical, host, region, now)
        return entry if entry is not None else self.match_host(host, region, now)

    def match_url(self, canonical: str, host: str, region: str | None,
                  now: float) -> Entry | None:
        """The active `url` or `prefix` entry for a URL: what depends on more than the host.

        The request path: the same order as `explain`, written out as plain probes of the
        tables that hold anything (no Match objects; an Entry only for the hit).
        """
        info = self._by_host.get(host)
        if info is None or info[0] != self._generation:
            info = self._remember(host)
        if not info[2]:  # no url or prefix entry under this host: the end for most URLs
            return None
        found = self._by_url.get(canonical)
        if found is None or found[0] != self._generation:
            found = self._remember_url(canonical, host, info)
        for entry in found[1]:
            if entry.active(region, now):
                return entry
        return None

    def _remember_url(self, canonical: str, host: str,
                      info: HostInfo) -> tuple[int, tuple[Entry, ...]]:
        # Stamped with the generation the host's flags were read at, never a later one:
        # a change landing since then makes this answer stale instead of current.
        generation, flags = info[0], info[2]
        cols = self._cols
        rows = cols.rows_for("url", url_key(canonical)) if flags & HAS_URL else []
        if flags & HAS_PREFIX:
            rows += [row for row, _ in _prefix_rows(cols, canonical, host)]
        found = (generation, tuple(e for e in map(cols.hit, rows) if e is not None))
        if len(canonical) <= canon.LONGEST_REMEMBERED:
            if len(self._by_url) >= URL_CACHE or self._url_chars >= URL_CACHE_CHARS:
                self._by_url.clear()
                self._url_chars = 0
            self._by_url[canonical] = found
            self._url_chars += len(canonical)
        return found

    def match_host(self, host: str, region: str | None, now: float) -> Entry | None:
        """The active `host`, `domain` or `org` entry for a host, most specific first."""
        return self.host_verdict(host, region, now)[0]

    def host_verdict(self, host: str, region: str | None,
                     now: float) -> tuple[Entry | None, bool]:
        """(match_host's entry, whether a url or prefix entry exists under the host).

        What the request path asks once per host of a page: a document on a host with
        neither needs no look of its own, which is most documents of most pages.
        """
        info = self._by_host.get(host)
        if info is None or info[0] != self._generation:
            info = self._remember(host)
        for entry in info[1]:
            if entry.active(region, now):
                return entry, info[2] != 0
        return None, info[2] != 0

    def _remember(self, host: str) -> HostInfo:
        generation = self._generation  # read first: a change meanwhile makes this one stale
        cols = self._cols
        h = hash(host)
        flags = (HAS_URL if h in cols.url_hosts else 0) | (
            HAS_PREFIX if h in cols.prefix_hosts else 0)
        info = (generation, self._covering(cols, host), flags)
        if len(host) <= 253:  # a DNS name; a giant host is not worth keeping
            if len(self._by_host) >= HOST_CACHE:
                self._by_host.clear()
            self._by_host[host] = info
        return info

    def _covering(self, cols: Columns, host: str) -> tuple[Entry, ...]:
        rows = cols.rows_for("host", host) if self.counts["host"] else []
        domains, orgs = self.counts["domain"], cols.orgs
        if domains or orgs:
            for suffix in _suffixes(host, self._labels):
                if domains:
                    rows += cols.rows_for("domain", suffix)
                rows += orgs.get(suffix, ())
        return tuple(e for e in map(cols.hit, rows) if e is not None)

    def _changed(self) -> None:
        self._generation += 1

    def domain_keys(self, host: str) -> tuple[str, ...]:
        """The names a domain or org ban of this host is looked up under (most specific
        first): the host and its parents up to the longest banned name, without the TLD."""
        return _suffixes(host, self._labels)

    def explain(self, canonical: str, host: str) -> list[Match]:
        """Every entry, active or not, whose value covers the URL, with the expression."""
        return list(self._candidates(canonical, host))

    def _candidates(self, canonical: str, host: str) -> Iterator[Match]:
        cols = self._cols
        key = url_key(canonical)
        for entry in _entries(cols, cols.rows_for("url", key)):
            yield Match(entry, f"url {key}")
        if hash(host) in cols.prefix_hosts:  # filters, never decides: keys are verified
            for row, path in _prefix_rows(cols, canonical, host):
                for entry in _entries(cols, (row,)):
                    yield Match(entry, f"prefix {entry.value} covers path {path}")
        for entry in _entries(cols, cols.rows_for("host", host)):
            yield Match(entry, f"host {host}")
        for suffix in _suffixes(host, self._labels):
            how = "the domain itself" if suffix == host else f"a parent of {host}"
            for entry in _entries(cols, cols.rows_for("domain", suffix)):
                yield Match(entry, f"domain {suffix} ({how})")
            for entry in _entries(cols, cols.orgs.get(suffix, ())):
                yield Match(entry, f"org {entry.value}: member domain {suffix} ({how})")


def _pinned(cols: Columns, n: int, alive: array) -> Iterator[Entry]:
    for row in range(n):
        if alive[row]:
            yield cols.entry(row, alive[row])


def _entries(cols: Columns, rows: Iterable[int]) -> Iterator[Entry]:
    """The rows as entries, skipping any removed since they were found."""
    for row in rows:
        entry = cols.entry(row)
        if entry is not None:
            yield entry


def _prefix_rows(cols: Columns, canonical: str, host: str) -> Iterator[tuple[int, str]]:
    _, path, _ = canon.split(canonical)
    # "/a" and "/a/" are one key once the slash is stripped: visit each key once
    keys = dict.fromkeys(host + p.rstrip("/") for p in reversed(canon.path_prefixes(path)))
    for key in keys:
        for row in cols.rows_for("prefix", key):
            yield row, path


def _suffixes(host: str, labels: int) -> tuple[str, ...]:
    """The host and its parents that a domain entry could be, most specific first.

    Only names of at most `labels` labels (the index's longest domain entry or org
    member), and never the bare TLD: every TLD is a public suffix (the PSL's `*` rule),
    which no domain entry or org member can be. An IP is only itself. Cached for hosts of
    DNS length (SERPs repeat hosts); longer ones are cheap to walk and not kept.
    """
    if len(host) <= 253:
        return _suffixes_cached(host, labels)
    return _parents(host, labels)


def _parents(host: str, labels: int) -> tuple[str, ...]:
    if host.startswith("[") or canon.is_ipv4(host):
        return (host,)
    starts: list[int] = []  # starts[k - 1]: where the parent of k labels begins
    pos = len(host)
    while len(starts) < labels:
        pos = host.rfind(".", 0, pos)
        if pos < 0:
            break
        starts.append(pos + 1)
    found = [host] if pos < 0 else []  # the whole host has at most `labels` labels
    found += [host[starts[k - 1]:] for k in range(len(starts), 1, -1)]
    return tuple(found)


_suffixes_cached = lru_cache(maxsize=65536)(_parents)
