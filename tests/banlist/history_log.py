"""Histories the T&S tests read back: one written through an embedded store, one as an
older version logged it (removals naming only the id)."""
from __future__ import annotations

from pathlib import Path

import orjson

from app.banlist import canon
from app.banlist.embedded.store import EmbeddedStore, EntrySpec
from app.banlist.history import ChangeFilter
from app.banlist.model import iso

T0 = 1_800_000_000.0  # the stores' clock: one change a minute from here


def flt(**kw) -> ChangeFilter:
    return ChangeFilter.of(**kw, now=T0)


def url(text: str) -> tuple[str, str]:
    """(canonical URL, host) of a URL."""
    canonical = canon.canonicalize(text)
    return canonical, canon.split(canonical)[0]


def written(path: Path | None, tail: int = 2) -> EmbeddedStore:
    """A store with a history of bans about example.com and others, one change a minute:
    adds (by tns, legal, antispam), an org group, a removal and a swept expiry."""
    clock = [T0]
    store = EmbeddedStore(path, clock=lambda: clock[0], tail=tail)
    steps = [
        lambda: store.add(EntrySpec("domain", "example.com", "court order"), "legal"),  # 1
        lambda: store.add(EntrySpec("url", "https://www.example.com/x", "dmca"), "tns"),  # 2
        lambda: store.add(EntrySpec("host", "shop.example.com", "fraud"), "tns"),  # 3
        lambda: store.add(EntrySpec("host", "other.org", "spam"), "antispam"),  # 4
        lambda: store.define_group("acme", ["example.com", "acme.net"], "tns", "one owner"),
        lambda: store.add(EntrySpec("org", "acme", "brand abuse"), "legal"),  # 6
        lambda: store.remove("1", "appeals", "appeal granted"),  # 7
        lambda: store.add(EntrySpec("host", "www.example.com", "malware",
                                    expires_at=clock[0] + 30), "antispam"),  # 8
    ]
    for step in steps:
        step()
        clock[0] += 60
    assert store.sweep() == 1  # seq 9: entry 8 expired
    return store


def older_log(path: Path) -> Path:
    """A log whose removals and expiry name only the entry id (as logged before they carried
    the entry): hosts a.example (1, removed), b.example (2, removed), domain a.example (3,
    expired)."""
    def add(seq: int, scope: str, value: str, actor: str, expires: float | None = None):
        entry = {"id": str(seq), "scope": scope, "value": value, "reason": "r", "actor": actor,
                 "created_at": iso(T0 + seq), "expires_at": expires and iso(expires),
                 "regions": []}
        return {"seq": seq, "op": "add", "entry": entry, "actor": actor, "reason": "r",
                "at": iso(T0 + seq)}

    lines = [add(1, "host", "a.example", "tns"), add(2, "host", "b.example", "tns"),
             add(3, "domain", "a.example", "legal", expires=T0 + 3.5),
             {"seq": 4, "op": "remove", "id": "1", "actor": "appeals", "reason": "sorry",
              "at": iso(T0 + 4)},
             {"seq": 5, "op": "expire", "id": "3", "actor": "system", "reason": "ttl elapsed",
              "at": iso(T0 + 5)},
             {"seq": 6, "op": "remove", "id": "2", "actor": "appeals", "reason": "other",
              "at": iso(T0 + 6)}]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))  # as the log does
    return path
