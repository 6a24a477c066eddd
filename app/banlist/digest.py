"""The banlist's content digest: the same on every replica holding the same entries and
groups, whatever order of changes brought them there (CONTRACT.md, `banlist_digest`).

The digest is the XOR of one 128-bit hash per entry and per group held (an entry expired
but not yet swept is held: the sweep is a change like any other), as 32 hex digits; an
empty banlist's is 32 zeros. XOR makes it independent of order, and lets every change
update it in O(1): an add XORs its entry's hash in, a removal XORs it out again, an edit
both. Each hash is the first 16 bytes of a SHA-1:

- an entry: SHA-1 of `e` LF id LF payload, the payload being the entry as Redis stores it
  under its id: the JSON of `Entry.as_dict()` without `id`, compact, keys in that order;
- a group: SHA-1 of `g` LF name LF its domains sorted, each followed by LF.

SHA-1 because Redis's Lua has it built in (`redis.sha1hex`): the write scripts keep the
source's digest beside the entries, atomically with each change, so a replica compares
its own with the one of the very version it holds. The digest detects divergence; it is
not a defence against an adversary able to write to Redis (who could simply write bans).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from app.banlist.index import BanIndex
from app.banlist.model import Entry

EMPTY = "0" * 32


def payload(entry: Entry) -> bytes:
    """The entry as Redis stores it under its id (what the write scripts hash)."""
    return stored(entry.as_dict())


def stored(doc: Mapping[str, Any]) -> bytes:
    """`payload` of an entry's `as_dict()` already made."""
    return orjson.dumps({k: v for k, v in doc.items() if k != "id"})


def entry_hash(entry_id: str, stored: bytes | str) -> int:
    """The hash of an entry, from its id and its stored payload."""
    raw = stored.encode() if isinstance(stored, str) else stored
    return int.from_bytes(hashlib.sha1(b"e\n" + entry_id.encode() + b"\n" + raw).digest()[:16])


def group_hash(name: str, domains: Iterable[str]) -> int:
    """The hash of an org group: its name and its domains, in sorted order."""
    text = "g\n" + name + "\n" + "".join(d + "\n" for d in sorted(domains))
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:16])


def of_entry(entry: Entry) -> int:
    return entry_hash(entry.id, payload(entry))


def hex_of(value: int) -> str:
    return f"{value:032x}"


class Digest:
    """A running digest, updated change by change (XOR: order does not matter)."""

    def __init__(self, value: int = 0) -> None:
        self.value = value

    @classmethod
    def of(cls, entries: Iterable[Entry], groups: Mapping[str, Iterable[str]]) -> Digest:
        """The digest of a whole copy (a resync's, a snapshot's)."""
        value = 0
        for entry in entries:
            value ^= of_entry(entry)
        for name, domains in groups.items():
            value ^= group_hash(name, domains)
        return cls(value)

    def toggle(self, h: int) -> None:
        """XOR one hash in (an add) or out (a removal: the same hash again)."""
        self.value ^= h

    @property
    def hex(self) -> str:
        return hex_of(self.value)


class Changes:
    """What a batch of changes does to the digest of the index it is about to be applied
    to, change by change: the hash of what is held under a key out, the hash of what the
    change puts there in. The index takes a batch whole, so what the batch already
    changed is remembered here; the rest is asked of the index (an add over an entry held
    already, as a resync's replay can make, changes nothing)."""

    def __init__(self, index: BanIndex) -> None:
        self.index = index
        self.held: dict[str, int] = {}  # id → hash of what this batch left there (0: none)
        self.groups: dict[str, tuple[str, ...]] | None = None  # the index's, read once

    def entry(self, key: str, new: int, stored_before: bytes | str | None = None) -> int:
        """XOR for `new` (an entry's hash, 0 for none) under `key`; `stored_before`, when
        the caller has it, is the payload held there (hashed as is, not re-serialized)."""
        if key in self.held:
            old = self.held[key]
        else:
            held = self.index.get(key)
            old = (0 if held is None else entry_hash(key, stored_before) if stored_before
                   else of_entry(held))
        self.held[key] = new
        return old ^ new

    def group(self, name: str, domains: Iterable[str]) -> int:
        """XOR for defining (or redefining) group `name` as `domains`."""
        if self.groups is None:
            self.groups = dict(self.index.groups)
        before = self.groups.get(name)
        members = tuple(domains)
        self.groups[name] = members
        return (group_hash(name, before) if before is not None else 0) ^ group_hash(name, members)


def applied(index: BanIndex, value: int, batch: Iterable[tuple[Any, ...]]) -> int:
    """The digest of `index` once `batch` (BanIndex.apply's changes: `("add", entry)`,
    `("remove", id)`, `("group", name, domains)`) is applied to it, from `value`, its
    digest now. Call it before applying the batch."""
    changes = Changes(index)
    for change in batch:
        if change[0] == "add":
            value ^= changes.entry(change[1].id, of_entry(change[1]))
        elif change[0] == "remove":
            value ^= changes.entry(change[1], 0)
        elif change[0] == "group":
            value ^= changes.group(change[1], change[2])
    return value
