"""Former entries past the graveyard's cap: an index of ends in Redis, by domain.

The graveyard (app/banlist/graveyard.py) keeps the last FORMER_MAX ended entries in memory.
When more ended within the history's window, the older ones would no longer be answered
by `lookup`, and reading the history stream through per lookup is O(history). So each
write script that removes or expires an entry also adds the history record's id to a
sorted set named after the ended entry (`name_of`): its registrable domain for a url,
prefix, host or domain entry, `org:<group>` for an org entry; scored by the record's time
in ms, trimmed to the window on each write and expiring with it (app/banlist/redis/lua.py).

A lookup reads the sets of the host's registrable domain and of the org groups holding a
domain related to it, newest first and only before what the graveyard holds; fetches those
records (`XRANGE id id`, pipelined: Redis is held for one at a time, never for the lot),
and keeps the entries that match the URL as the graveyard does, in a small index of their
own. At most SCAN ends are read and LIMIT former entries answered per lookup. Ends written
by an older release have no record in the sets: the index reaches back to
`Keys.ends_since`, when its first end was written.
"""
from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import Any

from app.banlist.graveyard import Ended, was
from app.banlist.history import ENDS, related_groups
from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso
from app.banlist.redis.client import TextRedis
from app.banlist.redis.keys import Keys
from app.domains import registrable_domain

LIMIT = 100  # former entries one lookup answers from the index (the newest ended first)
SCAN = 2_000  # ends one lookup reads from the sets (the newest first)

Change = dict[str, Any]
Reader = Callable[[str, dict[str, str]], Change | None]  # a history record as a change


def name_of(scope: str, value: str) -> str:
    """The set an entry's end is indexed under: `org:<group>` for an org entry, else the
    registrable domain of the host its value names (url and prefix values start with it)."""
    if scope == "org":
        return f"org:{value}"
    return registrable_domain(value.split("/", 1)[0])


class Ends:
    """The index of ends in Redis, read for the former entries the graveyard lost."""

    def __init__(self, client: TextRedis, keys: Keys, history_ms: int,
                 clock: Callable[[], float]) -> None:
        self.client, self.keys = client, keys
        self.history_ms, self.clock = history_ms, clock
        self._unreadable: set[str] = set()  # records `read` refused (and logged): not again

    def since(self) -> str | None:
        """When the oldest end the index can hold was written: the history window's start,
        or the index's first end if later (None: no end was ever indexed)."""
        first = self.client.get(self.keys.ends_since)
        if first is None:
            return None
        return iso(max(int(first), self._window_start()) / 1000)

    def former(self, canonical: str, host: str, live: BanIndex, before: float | None,
               answered: Container[str], read: Reader) -> list[dict[str, Any]]:
        """The gone entries ended at or before `before` (epoch seconds; None: any time)
        within the window that match a canonical URL, newest ended first, at most LIMIT;
        entries in `answered` (the graveyard's) and entries active again are left out.
        `read` turns a history record into a change (None: unreadable, left out)."""
        groups = related_groups(host, live.groups)
        names = [registrable_domain(host), *(f"org:{g}" for g in groups)]
        high: float | str = "+inf" if before is None else round(before * 1000)
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.zrevrangebyscore(self.keys.ends(name), high, self._window_start(),
                                  start=0, num=SCAN, withscores=True)
        rows = sorted({(score, sid) for found in pipe.execute() for sid, score in found},
                      reverse=True)[:SCAN]
        pipe = self.client.pipeline(transaction=False)
        for _, sid in rows:
            pipe.xrange(self.keys.history, min=sid, max=sid)
        records = [r for found in (pipe.execute() if rows else ()) for r in found
                   if r[0] not in self._unreadable]  # none: deleted from the stream by hand
        entries: dict[str, tuple[Entry, Ended]] = {}
        for sid, fields in records:
            end = read(sid, fields)
            if end is None:
                self._unreadable.add(sid)
            elif end["op"] in ENDS and _about(end.get("entry"), host):
                entry = Entry.from_dict(end["entry"])
                if entry.id in answered or entry.id in entries or live.get(entry.id) is not None:
                    continue
                entries[entry.id] = entry, Ended(end["op"], end["seq"], end["at"],
                                                 end["actor"], end["reason"])
        return _matching(canonical, host, entries, {g: live.groups[g] for g in groups})

    def _window_start(self) -> int:
        return max(0, int(self.clock() * 1000) - self.history_ms)


def _about(entry: Change | None, host: str) -> bool:
    """Whether an ended entry may match URLs of `host` (what `_matching` then checks): an
    org entry (its group is related), or one naming the host or, a domain entry, a parent."""
    if not entry:
        return False  # an end logged without its entry: not one this index records
    scope, name = entry.get("scope"), str(entry.get("value", "")).split("/", 1)[0]
    if scope == "org":
        return True
    return name == host or (scope == "domain" and host.endswith("." + name))


def _matching(canonical: str, host: str, entries: Mapping[str, tuple[Entry, Ended]],
              groups: dict[str, tuple[str, ...]]) -> list[dict[str, Any]]:
    """Graveyard.former's answer over `entries`: those matching the URL, newest ended
    first, at most LIMIT."""
    if not entries:
        return []
    index = BanIndex((entry for entry, _ in entries.values()), groups)
    found = sorted(((m, entries[m.entry.id][1]) for m in index.explain(canonical, host)),
                   key=lambda item: (item[1].at, item[1].seq), reverse=True)[:LIMIT]
    out = []
    for m, end in found:
        ended = end._asdict()
        out.append({**m.as_dict(), "ended": ended, "was": was(m.entry, ended)})
    return out
