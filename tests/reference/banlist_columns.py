"""The banlist's entries as columns: one row per entry, fields in arrays, values in one blob.

A row is never moved or reused: a removed entry's row is marked dead (meta 0) and dropped
when the index compacts into new columns. What repeats across entries (scope, reason,
actor, regions) is interned once as a `meta` tuple, and a row holds its number.
"""
from __future__ import annotations

import math
from array import array

from app.banlist.model import Entry
from tests.reference.banlist_table import HashBag, RowTable

Meta = tuple[str, str, str, frozenset[str]]  # scope, reason, actor, regions
DEAD = 0
NO_EXPIRY = math.nan  # compares false to everything, so `expires <= now` is never true
MADE = 4096  # entries remembered for hits (per index generation)
# The scope is mixed into a key's hash, so `a.com` as a host and as a domain sit apart
SALT = {"url": 0x2545F4914F6CDD1D, "prefix": 0x5851F42D4C957F2D,
        "host": 0x14057B7EF767814F, "domain": 0x3C6EF372FE94F82B}


def numeric_id(entry_id: str) -> int:
    """The id as a number when it is a plain decimal (`"42"`, not `"042"`), else -1."""
    if (entry_id.isdigit() and entry_id.isascii() and len(entry_id) <= 18
            and (entry_id[0] != "0" or entry_id == "0")):
        return int(entry_id)
    return -1


def key_of(scope: str, value: str) -> str:
    """The string an entry is matched by: a prefix without its trailing slash."""
    return value.rstrip("/") if scope == "prefix" else value


class Columns:
    """Every entry of one index generation; tables hold row numbers into these arrays."""

    __slots__ = ("n", "dead", "khash", "meta_id", "ids", "created", "expires", "off", "blob",
                 "metas", "meta_ids", "keys", "by_id", "named", "names", "url_hosts",
                 "prefix_hosts", "orgs", "org_rows", "expiring", "max_id", "made")

    def __init__(self, rows: int = 0) -> None:
        self.n = 0  # rows written; bumped last, so a reader never sees half a row
        self.dead = 0
        self.khash = array("q")  # hash of the key (salted by scope); 0 for org rows
        self.meta_id = array("I")  # into metas; DEAD for a removed entry
        self.ids = array("q")  # the numeric id, or -1 (then `names` holds it)
        self.created = array("d")
        self.expires = array("d")  # NO_EXPIRY when the entry never expires
        self.off = array("Q", [0])  # value of row r: blob[off[r]:off[r + 1]], UTF-8
        self.blob = bytearray()
        self.metas: list[Meta | None] = [None]
        self.meta_ids: dict[Meta, int] = {}
        self.keys = RowTable(rows, 0.5)  # url/prefix/host/domain key -> rows (by khash)
        self.by_id = RowTable(rows, 0.75, spread=True)  # numeric id -> row (by ids)
        self.named: dict[str, int] = {}  # other ids -> row (tests, hand-made indexes)
        self.names: dict[int, str] = {}
        self.url_hosts = HashBag()  # hash of the host of every url entry
        self.prefix_hosts = HashBag()  # hash of the host of every prefix entry
        self.orgs: dict[str, tuple[int, ...]] = {}  # member domain -> org rows covering it
        self.org_rows: dict[int, None] = {}  # live org rows, in row order
        self.expiring = array("i")  # rows that have an expiry (what a sweep looks at)
        self.max_id = -1
        self.made: dict[int, Entry] = {}  # entries made for hits: the same ones recur

    def put(self, entry_id: str, meta: Meta, raw: bytes, khash: int, created: float,
            expires: float) -> int:
        """Append a row (not yet findable by key or id: see `publish`); returns its number."""
        row = self.n
        mid = self.meta_ids.get(meta)
        if mid is None:
            mid = self.meta_ids[meta] = len(self.metas)
            self.metas.append(meta)
        number = numeric_id(entry_id)
        self.khash.append(khash)
        self.meta_id.append(mid)
        self.ids.append(number)
        self.created.append(created)
        self.expires.append(expires)
        self.blob += raw
        self.off.append(len(self.blob))
        if number < 0:
            self.names[row] = entry_id
        elif number > self.max_id:
            self.max_id = number
        if expires == expires:
            self.expiring.append(row)
        self.n = row + 1
        return row

    def publish(self, row: int, entry_id: str, scope: str, key: str,
                members: tuple[str, ...]) -> None:
        """Make a row findable: by id, and by key (or, for an org, by its member domains)."""
        if scope == "org":
            self.org_rows[row] = None
            link_org(self.orgs, members, row)
        else:
            self.keys.insert(self.khash[row], row, self.khash)
            if scope in ("url", "prefix"):
                self.hosts_of(scope).add(hash(key.partition("/")[0]))
        number = self.ids[row]
        if number >= 0:
            self.by_id.insert(number, row, self.ids)
        else:
            self.named[entry_id] = row

    def unpublish(self, row: int, entry_id: str, scope: str, key: str,
                  members: tuple[str, ...]) -> None:
        """Mark a row dead (readers skip it at once), then drop it from every table."""
        self.meta_id[row] = DEAD
        self.dead += 1
        if scope == "org":
            unlink_org(self.orgs, members, row)
            self.org_rows.pop(row, None)
        else:
            self.keys.delete(self.khash[row], row)
            if scope in ("url", "prefix"):
                self.hosts_of(scope).discard(hash(key.partition("/")[0]))
        number = self.ids[row]
        if number >= 0:
            self.by_id.delete(number, row)
        else:
            self.named.pop(entry_id, None)
            self.names.pop(row, None)

    def hosts_of(self, scope: str) -> HashBag:
        """The hosts having `url` (or `prefix`) entries: what a host needs probed per URL."""
        return self.url_hosts if scope == "url" else self.prefix_hosts

    def row_of(self, entry_id: str) -> int | None:
        number = numeric_id(entry_id)
        if number < 0:
            return self.named.get(entry_id)
        rows = self.by_id.find(number, self.ids)
        return rows[0] if rows else None

    def rows_for(self, scope: str, key: str) -> list[int]:
        """Live rows of `scope` keyed exactly `key` (a hash hit is checked, never trusted)."""
        rows = self.keys.find(hash(key) ^ SALT[scope], self.khash)
        if not rows:
            return rows
        want = key.encode()
        metas, meta_id, blob, off = self.metas, self.meta_id, self.blob, self.off
        out = []
        for row in rows:
            meta = metas[meta_id[row]]
            if meta is None or meta[0] != scope:
                continue
            raw = blob[off[row]:off[row + 1]]
            if (raw.rstrip(b"/") if scope == "prefix" else raw) == want:
                out.append(row)
        return out

    def value(self, row: int) -> str:
        return self.blob[self.off[row]:self.off[row + 1]].decode()

    def entry_id(self, row: int) -> str:
        number = self.ids[row]
        return str(number) if number >= 0 else self.names[row]

    def entry(self, row: int, meta_id: int | None = None) -> Entry | None:
        """The row as an Entry (None if it was removed meanwhile); `meta_id` from a copy
        of the column (BanIndex.frozen) reads the row as it was when the copy was made."""
        meta = self.metas[self.meta_id[row] if meta_id is None else meta_id]
        if meta is None:
            return None
        scope, reason, actor, regions = meta
        expires = self.expires[row]
        return Entry(self.entry_id(row), scope, self.value(row), reason, actor,
                     self.created[row], None if expires != expires else expires, regions)

    def hit(self, row: int) -> Entry | None:
        """`entry` for the request path, remembered: a banned URL recurs across pages.

        Rows are never reused and a live row never changes, so a remembered entry is right
        for as long as its row is live, which is checked first.
        """
        if not self.meta_id[row]:
            return None
        entry = self.made.get(row)
        if entry is None:
            entry = self.entry(row)
            if entry is not None:
                if len(self.made) >= MADE:
                    self.made.clear()
                self.made[row] = entry
        return entry

    def active(self, row: int, region: str | None, now: float) -> bool:
        """Entry.active from the columns: unexpired, and global or covering `region`."""
        if self.expires[row] <= now:
            return False
        meta = self.metas[self.meta_id[row]]
        return meta is not None and (not meta[3] or region in meta[3])

    def compacted(self, groups: dict[str, tuple[str, ...]]) -> Columns:
        """The live rows copied into new columns, in order; tables sized for them at once."""
        new = Columns(self.n - self.dead)
        metas, meta_id = self.metas, self.meta_id
        for row in range(self.n):
            meta = metas[meta_id[row]]
            if meta is None:
                continue
            entry_id = self.entry_id(row)
            raw = bytes(self.blob[self.off[row]:self.off[row + 1]])
            scope = meta[0]
            new_row = new.put(entry_id, meta, raw, self.khash[row], self.created[row],
                              self.expires[row])
            value = raw.decode() if scope in ("url", "prefix", "org") else ""
            new.publish(new_row, entry_id, scope, key_of(scope, value),
                        groups.get(value, ()) if scope == "org" else ())
        return new


def link_org(orgs: dict[str, tuple[int, ...]], domains: tuple[str, ...], row: int) -> None:
    """Add an org row under its member domains; rows in row order, whatever the history."""
    for domain in domains:
        orgs[domain] = tuple(sorted((*orgs.get(domain, ()), row)))


def unlink_org(orgs: dict[str, tuple[int, ...]], domains: tuple[str, ...], row: int) -> None:
    for domain in domains:
        rest = tuple(r for r in orgs.get(domain, ()) if r != row)
        if rest:
            orgs[domain] = rest
        else:
            orgs.pop(domain, None)
