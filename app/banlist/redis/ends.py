"""Former entries past the graveyard's cap: an index of ends in Redis, by domain.

Each write script that removes or expires an entry also adds the history record's id to a
sorted set named after the ended entry (`name_of`): its registrable domain for a url,
prefix, host or domain entry, `org:<group>` for an org entry; scored by the record's time
in ms, trimmed to the history's window on each write and expiring with it
(app/banlist/redis/lua.py).
"""
from __future__ import annotations

from app.domains import registrable_domain


def name_of(scope: str, value: str) -> str:
    """The set an entry's end is indexed under: `org:<group>` for an org entry, else the
    registrable domain of the host its value names (url and prefix values start with it)."""
    if scope == "org":
        return f"org:{value}"
    return registrable_domain(value.split("/", 1)[0])
