"""The entries that are gone (removed, or expired and swept), kept to answer "was this URL
banned, and why not any more?": `lookup`'s `former`, without reading the change log.

Built as the change log is read and kept up to date as it grows (the embedded store fills
it from the end of its log on first use, then on each removal and sweep; the Redis store
from its stream, read on from where it stopped at each lookup), in a matching index of its
own, so a lookup costs what a lookup of the live list costs.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso

FORMER_MAX = 100_000  # gone entries kept (the oldest ended are dropped past it): ~30 MB

Change = dict[str, Any]


class Ended(NamedTuple):
    """How a gone entry ended: the `remove` or `expire` change's op, seq, time, actor and
    reason."""

    op: str
    seq: int
    at: str
    actor: str
    reason: str


class Graveyard:
    """Gone entries, each with the change that ended it; at most `cap`, the oldest ended
    dropped first. `since` is when the oldest change it knows of was made: past a drop,
    when the last dropped entry ended."""

    def __init__(self, cap: int = FORMER_MAX) -> None:
        self.cap = cap
        self.index = BanIndex()
        self.ends: dict[str, Ended] = {}  # by entry id
        self.since: str | None = None
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.ends)

    def bury(self, gone: list[tuple[Entry, Change]]) -> None:
        """Entries that just ended, each with its `remove` or `expire` change (one batch)."""
        if not gone:
            return
        with self.lock:
            self.index.apply([("add", entry) for entry, _ in gone])
            for entry, end in gone:
                self.ends[entry.id] = Ended(end["op"], end["seq"], end.get("at", ""),
                                            end.get("actor", ""), end.get("reason", ""))
            if len(self.ends) > self.cap:  # a tenth at a time: one index swap per drop
                dropped = list(self.ends)[:len(self.ends) - self.cap * 9 // 10]
                self.index.apply([("remove", i) for i in dropped])
                self.since = max(self.since or "", self.ends[dropped[-1]].at)
                for i in dropped:
                    del self.ends[i]

    def oldest(self) -> int | None:
        """The seq of the oldest end held (None: none), ends being buried in seq order."""
        with self.lock:
            return next(iter(self.ends.values())).seq if self.ends else None

    def former(self, canonical: str, host: str, live: BanIndex) -> list[dict[str, Any]]:
        """The gone entries that match a canonical URL (org groups as the live list defines
        them now), each with `ended` and `was`; the latest ended first."""
        with self.lock:
            for name, members in live.groups.items():
                if self.index.groups.get(name) != members:
                    self.index.set_group(name, members)
            found = [(m, self.ends[m.entry.id]) for m in self.index.explain(canonical, host)
                     if live.get(m.entry.id) is None]  # not back (an adopted older list)
        found.sort(key=lambda item: -item[1].seq)
        out = []
        for m, end in found:
            ended = end._asdict()
            out.append({**m.as_dict(), "ended": ended, "was": was(m.entry, ended)})
        return out


def was(entry: Entry, ended: Mapping[str, Any] | None = None) -> str:
    """`was banned until <when>, by <actor>, reason <reason>` and how it ended."""
    where = f" in {', '.join(sorted(entry.regions))}" if entry.regions else ""
    if ended is not None and ended["op"] != "expire":
        until, how = ended["at"], f"removed by {ended['actor']}: {ended['reason']}"
    else:  # an expiry is logged when the sweeper finds it: the entry says when it was
        until = iso(entry.expires_at) if entry.expires_at is not None else (
            ended or {}).get("at")
        how = "expired"
    return (f"was banned{where} until {until}, by {entry.actor}, reason {entry.reason} "
            f"({how})")
