"""The change log read back for T&S: history filtered by value, host, actor and time.

Both stores feed changes here in seq order (the embedded store from its log file, the Redis
store from its stream); what is kept is decided here, the same for both. A `remove` or
`expire` change carries the entry it ended (`entry`); one logged before it did names only
the id, and is matched through the `add` of that id read earlier in the same pass.

`page` is what the changes route answers: the oldest changes after a seq, or the newest
before one, and whether more lie beyond them.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from app.banlist import canon
from app.banlist.model import SCOPES, iso, normalize
from app.domains import registrable_domain
from app.errors import BanlistError, FieldError
from app.timespec import parse_time

Change = dict[str, Any]
ENDS = ("remove", "expire")


@dataclass(frozen=True, slots=True)
class ChangeFilter:
    """Which changes to keep; every field given must hold (an empty filter keeps all).

    `values`: (scope, normalized value) pairs the asked value spells; `host`: a canonical
    host, kept when a change's entry bans it, a subdomain of it or a parent domain of it;
    `start`/`until`: ISO 8601 UTC instants as the log writes them (`at`), start inclusive.
    """

    values: frozenset[tuple[str, str]] = frozenset()
    host: str | None = None
    actor: str | None = None
    start: str | None = None
    until: str | None = None

    @classmethod
    def of(cls, value: str | None = None, host: str | None = None, actor: str | None = None,
           start: str | None = None, until: str | None = None,
           now: float = 0.0) -> ChangeFilter:
        """The filter of a history query's parameters; FieldError naming a bad one."""
        values: frozenset[tuple[str, str]] = frozenset()
        if value is not None:
            values = _spellings(value)
        times = {}
        for name, text in (("from", start), ("until", until)):
            if text is not None:
                try:
                    times[name] = iso(parse_time(text, now, ages=False))
                except ValueError as exc:
                    raise FieldError(f"query.{name}", str(exc)) from None
        if "from" in times and "until" in times and times["from"] >= times["until"]:
            raise FieldError("query.until", f"{until} is not after from={start}")
        return cls(values, host_param(host) if host is not None else None,
                   actor.strip() if actor is not None else None,
                   times.get("from"), times.get("until"))

    def empty(self) -> bool:
        return not (self.values or self.host or self.actor or self.start or self.until)

    def needles(self, groups: Mapping[str, tuple[str, ...]]) -> list[bytes] | None:
        """Bytes of which every kept change's log line holds one (None: any line may):
        what the embedded store searches its file for before parsing a line."""
        if self.values:
            return sorted({_json(v)[1:-1] for _, v in self.values})
        if self.host:
            # every entry about the host, a subdomain or a parent domain (never a public
            # suffix) names its registrable domain; an org entry names its group
            return sorted({registrable_domain(self.host).encode(), *(
                _json(g)[1:-1] for g in related_groups(self.host, groups))})
        if self.actor:
            return [b'"actor":' + _json(self.actor)]
        return None


class Matcher:
    """Keeps the changes a filter wants, in seq order, remembering the ids of the adds it
    kept so that a bare `remove` or `expire` of one of them is kept too."""

    def __init__(self, flt: ChangeFilter, groups: Mapping[str, tuple[str, ...]]) -> None:
        self.flt, self.groups = flt, groups
        self.kept: dict[str, Change] = {}  # id -> the entry of a kept add

    def take(self, change: Change) -> bool:
        flt = self.flt
        at = change.get("at", "")
        if (flt.start and at < flt.start) or (flt.until and at >= flt.until):
            return False
        if flt.actor is not None and change.get("actor") != flt.actor:
            return False
        if not (flt.values or flt.host):
            return True
        op = change.get("op")
        if op == "group":
            return self._group(change["name"], change.get("domains") or ())
        entry = change.get("entry")
        if entry is None and op in ENDS:
            return change.get("id") in self.kept
        if not isinstance(entry, dict) or not self._entry(entry):
            return False
        self.kept[str(entry.get("id", change.get("id")))] = entry
        return True

    def _entry(self, entry: Change) -> bool:
        scope = entry.get("scope")
        value: str = entry.get("value", "")
        if self.flt.values and (scope, value) not in self.flt.values:
            return False
        host = self.flt.host
        if host is None:
            return True
        if scope == "org":
            return any(_related(d, host) for d in self.groups.get(value, ()))
        name = value.split("/", 1)[0]
        if scope == "domain":
            return _related(name, host)
        return name == host or name.endswith("." + host)

    def _group(self, name: str, domains: Iterable[str]) -> bool:
        if self.flt.values and ("org", name) not in self.flt.values:
            return False
        return self.flt.host is None or any(_related(d, self.flt.host) for d in domains)


def select(changes: Iterable[Change], flt: ChangeFilter, groups: Mapping[str, tuple[str, ...]],
           since: int, limit: int, before: int | None = None,
           newest: bool = False) -> list[Change]:
    """Up to `limit` changes with `since` < seq < `before` that `flt` keeps, in seq order:
    the first such, or with `newest` the last (the whole range is read then, as a kept
    removal may hang on an add read much earlier)."""
    matcher = Matcher(flt, groups)
    out: deque[Change] = deque(maxlen=limit if newest else None)
    for change in changes:
        if before is not None and change["seq"] >= before:
            break
        if matcher.take(change) and change["seq"] > since:
            out.append(change)
            if not newest and len(out) >= limit:
                break
    return list(out)


class Log(Protocol):
    """What `page` reads of a store: its version (the newest seq) and its change log."""

    @property
    def version(self) -> int: ...

    def changes_since(self, seq: int, limit: int = 1000) -> list[Change]: ...

    def history(self, flt: ChangeFilter, since: int = 0, limit: int = 1000,
                before: int | None = None, newest: bool = False) -> list[Change]: ...


def page(log: Log, flt: ChangeFilter, since: int, before: int | None, limit: int,
         newest: bool) -> tuple[list[Change], bool]:
    """(up to `limit` changes with `since` < seq < `before` that `flt` keeps, whether more
    such lie beyond them): the oldest first, or with `newest` the newest first, the `more`
    then being older ones. One more than `limit` is read to know."""
    if not flt.empty():
        found = log.history(flt, since, limit + 1, before, newest)
    elif newest:
        found = _last(log, since, before, limit + 1)
    else:
        found = [c for c in log.changes_since(since, limit + 1)
                 if before is None or c["seq"] < before]
    more = len(found) > limit
    if newest:
        return found[::-1][:limit], more
    return found[:limit], more


def _last(log: Log, since: int, before: int | None, want: int) -> list[Change]:
    """The last `want` changes with `since` < seq < `before`, in seq order, read back from
    `before` in windows of seqs: a seq is not a change's rank (a seed takes one seq per
    entry and logs one change, Redis's stream keeps a window), so a window that finds too
    few is widened until it reaches `since`."""
    end = log.version + 1 if before is None else before
    if end - 1 <= since:
        return []
    window = want
    while True:
        start = max(since, end - 1 - window)
        found = [c for c in log.changes_since(start, end - 1 - start) if c["seq"] < end]
        if len(found) >= want or start <= since:
            return found[-want:]
        window *= 4


def host_param(text: str) -> str:
    """The canonical host of a `host` parameter (a host name or a URL); FieldError if none."""
    url = text.strip() if "://" in text else f"http://{text.strip()}/"
    try:
        return canon.canonicalize_with_host(url)[1]
    except canon.InvalidURL as exc:
        raise FieldError("query.host", f"{text[:80]!r} is not a host name or URL: {exc}") from None


def _spellings(value: str) -> frozenset[tuple[str, str]]:
    """(scope, normalized value) for each scope `value` is a valid value of."""
    out = set()
    for scope in SCOPES:
        try:
            out.add((scope, normalize(scope, value)))
        except BanlistError:
            continue
    if not out:
        raise FieldError("query.value", f"{value[:80]!r} is not a value of any scope "
                         f"({', '.join(SCOPES)})")
    return frozenset(out)


def related_groups(host: str, groups: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The org groups holding `host`, one of its parents or one of its subdomains: every
    group an org entry about the host (or a relative) names."""
    return [g for g, members in groups.items() if any(_related(m, host) for m in members)]


def _related(name: str, host: str) -> bool:
    """A domain `name` that is `host`, one of its parents or one of its subdomains."""
    return name == host or host.endswith("." + name) or name.endswith("." + host)


def _json(text: str) -> bytes:
    return orjson.dumps(text)
