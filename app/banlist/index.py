"""The in-memory banlist index: O(1) per scope, O(labels) for domains, O(segments) for prefixes."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from app.banlist import canon
from app.banlist.model import SCOPES, Entry, url_key


@dataclass(frozen=True, slots=True)
class Match:
    """An entry that matches a URL, and through which expression."""

    entry: Entry
    expression: str

    def as_dict(self) -> dict[str, object]:
        return {**self.entry.as_dict(), "matched_by": self.expression}


HOST_CACHE = 65_536  # hosts whose covering entries are remembered between changes


class BanIndex:
    """Entries keyed by what they match; dicts of tuples, not sets, to keep GC walks short."""

    __slots__ = ("_url", "_prefix", "_prefix_hosts", "_host", "_domain", "_org", "_by_id",
                 "groups", "counts", "_generation", "_by_host")

    def __init__(self, entries: Iterable[Entry] = (),
                 groups: dict[str, tuple[str, ...]] | None = None) -> None:
        self._url: dict[str, tuple[Entry, ...]] = {}
        self._prefix: dict[str, tuple[Entry, ...]] = {}
        self._prefix_hosts: dict[str, int] = {}
        self._host: dict[str, tuple[Entry, ...]] = {}
        self._domain: dict[str, tuple[Entry, ...]] = {}
        self._org: dict[str, tuple[Entry, ...]] = {}  # member domain -> org entries covering it
        self._by_id: dict[str, Entry] = {}
        self.groups: dict[str, tuple[str, ...]] = dict(groups or {})  # org name -> its domains
        self.counts: dict[str, int] = dict.fromkeys(SCOPES, 0)
        # host -> (generation, the host/domain/org entries that cover it, most specific
        # first): hosts repeat across pages, so the suffix walk is done once per host until
        # the next change. Every change bumps the generation, so an answer computed while
        # a change was being applied is never reused after it.
        self._generation = 0
        self._by_host: dict[str, tuple[int, tuple[Entry, ...]]] = {}
        for entry in entries:
            self.add(entry)

    def set_group(self, name: str, domains: tuple[str, ...]) -> None:
        """Define or redefine an org group; entries banning it follow the new members.

        The member table is rebuilt aside and swapped in one reference, so a request never
        sees the group half moved (members that stay in it briefly unbanned).
        """
        self._changed()
        banned = [e for e in self._by_id.values() if e.scope == "org" and e.value == name]
        orgs = dict(self._org)
        for entry in banned:
            _unlink(orgs, self.groups.get(entry.value, ()), entry)
        for entry in banned:
            _link(orgs, domains, entry)
        self.groups[name] = domains
        self._org = orgs

    def _link_org(self, entry: Entry) -> None:
        _link(self._org, self.groups.get(entry.value, ()), entry)

    def _unlink_org(self, entry: Entry) -> None:
        _unlink(self._org, self.groups.get(entry.value, ()), entry)

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._by_id.values())

    def get(self, entry_id: str) -> Entry | None:
        return self._by_id.get(entry_id)

    def by_value(self, scope: str, value: str) -> tuple[Entry, ...]:
        """Every entry written for exactly this scope and value (e.g. a host's sanctions)."""
        probe = Entry("", scope, value, "", "", 0.0, None, frozenset())
        table, key = self._slot(probe)
        return tuple(e for e in table.get(key, ()) if e.scope == scope and e.value == value)

    def add(self, entry: Entry) -> None:
        """Index an entry (replacing one with the same id)."""
        self._changed()
        if entry.id in self._by_id:
            self.remove(entry.id)
        self._by_id[entry.id] = entry
        self.counts[entry.scope] += 1
        if entry.scope == "org":
            self._link_org(entry)
            return
        table, key = self._slot(entry)
        table[key] = table.get(key, ()) + (entry,)
        if entry.scope == "prefix":
            host = key.partition("/")[0]
            self._prefix_hosts[host] = self._prefix_hosts.get(host, 0) + 1

    def remove(self, entry_id: str) -> Entry | None:
        """Drop an entry by id; returns it, or None if it was not there."""
        self._changed()
        entry = self._by_id.pop(entry_id, None)
        if entry is None:
            return None
        self.counts[entry.scope] -= 1
        if entry.scope == "org":
            self._unlink_org(entry)
            return entry
        table, key = self._slot(entry)
        rest = tuple(e for e in table.get(key, ()) if e.id != entry_id)
        if rest:
            table[key] = rest
        else:
            table.pop(key, None)
        if entry.scope == "prefix":
            host = key.partition("/")[0]
            left = self._prefix_hosts.get(host, 1) - 1
            if left:
                self._prefix_hosts[host] = left
            else:
                self._prefix_hosts.pop(host, None)
        return entry

    def _slot(self, entry: Entry) -> tuple[dict[str, tuple[Entry, ...]], str]:
        if entry.scope == "url":
            return self._url, entry.value
        if entry.scope == "prefix":
            return self._prefix, entry.value.rstrip("/")
        if entry.scope == "host":
            return self._host, entry.value
        return self._domain, entry.value

    def match(self, canonical: str, host: str, region: str | None, now: float) -> Entry | None:
        """The most specific active entry for a canonical URL (url, prefix, host, domain, org)."""
        entry = self.match_url(canonical, host, region, now)
        return entry if entry is not None else self.match_host(host, region, now)

    def match_url(self, canonical: str, host: str, region: str | None,
                  now: float) -> Entry | None:
        """The active `url` or `prefix` entry for a URL: what depends on more than the host.

        The request path: the same order as `explain`, written out as plain dict probes over
        the tables that hold anything (no generator for the common case, no Match objects).
        """
        if self._url:
            for entry in self._url.get(url_key(canonical), ()):
                if entry.active(region, now):
                    return entry
        if host in self._prefix_hosts:
            for found in self._prefix_matches(canonical, host):
                if found.entry.active(region, now):
                    return found.entry
        return None

    def match_host(self, host: str, region: str | None, now: float) -> Entry | None:
        """The active `host`, `domain` or `org` entry for a host, most specific first."""
        generation = self._generation
        cached = self._by_host.get(host)
        if cached is not None and cached[0] == generation:
            covering = cached[1]
        else:
            covering = self._covering(host)
            if len(self._by_host) >= HOST_CACHE:
                self._by_host.clear()
            self._by_host[host] = (generation, covering)
        for entry in covering:
            if entry.active(region, now):
                return entry
        return None

    def _covering(self, host: str) -> tuple[Entry, ...]:
        found = self._host.get(host, ())
        domains, orgs = self._domain, self._org
        if domains or orgs:
            for suffix in _suffixes(host):
                found += domains.get(suffix, ()) + orgs.get(suffix, ())
        return found

    def _changed(self) -> None:
        self._generation += 1

    def explain(self, canonical: str, host: str) -> list[Match]:
        """Every entry, active or not, whose value covers the URL, with the expression."""
        return list(self._candidates(canonical, host))

    def _prefix_matches(self, canonical: str, host: str) -> Iterator[Match]:
        _, path, _ = canon.split(canonical)
        # "/a" and "/a/" are one key once the slash is stripped: visit each key once
        keys = dict.fromkeys(host + p.rstrip("/") for p in reversed(canon.path_prefixes(path)))
        for key in keys:
            for entry in self._prefix.get(key, ()):
                yield Match(entry, f"prefix {entry.value} covers path {path}")

    def _candidates(self, canonical: str, host: str) -> Iterator[Match]:
        if self._url:
            key = url_key(canonical)
            for entry in self._url.get(key, ()):
                yield Match(entry, f"url {key}")
        if host in self._prefix_hosts:
            yield from self._prefix_matches(canonical, host)
        for entry in self._host.get(host, ()):
            yield Match(entry, f"host {host}")
        if self._domain or self._org:
            for suffix in _suffixes(host):
                how = "the domain itself" if suffix == host else f"a parent of {host}"
                for entry in self._domain.get(suffix, ()):
                    yield Match(entry, f"domain {suffix} ({how})")
                for entry in self._org.get(suffix, ()):
                    yield Match(entry, f"org {entry.value}: member domain {suffix} ({how})")


@lru_cache(maxsize=65536)
def _suffixes(host: str) -> tuple[str, ...]:
    """Parent domains of a host, cached: a SERP repeats hosts and so do SERPs."""
    return tuple(canon.host_suffixes(host))


def _link(orgs: dict[str, tuple[Entry, ...]], domains: Iterable[str], entry: Entry) -> None:
    for domain in domains:
        orgs[domain] = orgs.get(domain, ()) + (entry,)


def _unlink(orgs: dict[str, tuple[Entry, ...]], domains: Iterable[str], entry: Entry) -> None:
    for domain in domains:
        rest = tuple(e for e in orgs.get(domain, ()) if e.id != entry.id)
        if rest:
            orgs[domain] = rest
        else:
            orgs.pop(domain, None)
