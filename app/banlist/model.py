"""Banlist entries, and turning a scope's written value into the key it is matched by."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from app.banlist import canon
from app.domains import is_public_suffix
from app.errors import BanlistError

# What an entry covers; the one list of scopes the API body, the CLI, the import parsers
# and the history filter take (docs/banlist.md#entries-and-scopes).
Scope = Literal["url", "prefix", "host", "domain", "org"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
_GROUP_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# a canonical host name: lowercase labels of letters, digits, "-" and "_" (punycode included)
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


@dataclass(frozen=True, slots=True)
class Entry:
    """One ban: what it covers (scope + value), why, who, when, until when, where."""

    id: str
    scope: str
    value: str
    reason: str
    actor: str
    created_at: float
    expires_at: float | None
    regions: frozenset[str]

    def unexpired(self, now: float) -> bool:
        """Still in force at `now` (no expiry, or a later one)."""
        return self.expires_at is None or self.expires_at > now

    def active(self, region: str | None, now: float) -> bool:
        """Unexpired, and global or covering the request's region."""
        return self.unexpired(now) and (not self.regions or region in self.regions)

    def describe(self) -> str:
        """The audit reason: `domain example.org banned (legal removal) [entry 12]`."""
        return f"{self.scope} {self.value} banned ({self.reason}) [entry {self.id}]"

    def as_dict(self) -> dict[str, Any]:
        """JSON form, times as ISO 8601 UTC."""
        return {
            "id": self.id, "scope": self.scope, "value": self.value, "reason": self.reason,
            "actor": self.actor, "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at) if self.expires_at is not None else None,
            "regions": sorted(self.regions),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        """Inverse of as_dict (for the persisted log)."""
        expires = data.get("expires_at")
        return cls(  # scope, actor and reason repeat across entries: one copy of each
            id=str(data["id"]), scope=sys.intern(data["scope"]), value=data["value"],
            reason=sys.intern(data["reason"]), actor=sys.intern(data["actor"]),
            created_at=parse_iso(data["created_at"]),
            expires_at=parse_iso(expires) if expires else None,
            regions=frozenset(data.get("regions") or ()),
        )


@dataclass(frozen=True, slots=True)
class Match:
    """An entry that matches a URL, and through which expression."""

    entry: Entry
    expression: str

    def as_dict(self) -> dict[str, object]:
        return {**self.entry.as_dict(), "matched_by": self.expression}


def iso(ts: float) -> str:
    """Epoch seconds as ISO 8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def parse_iso(text: str) -> float:
    """ISO 8601 (with Z or an offset) to epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def normalize(scope: str, value: str) -> str:
    """The canonical written form of a value for its scope; BanlistError when malformed."""
    if scope not in SCOPES:
        raise BanlistError("scope", f"unknown scope {scope!r} (one of {', '.join(SCOPES)})")
    raw = value.strip()
    if not raw:
        raise BanlistError("value", "empty")
    if scope == "org":
        return group_name(raw, "value")
    try:
        # without a scheme a value is an http URL, as canonicalize itself takes it
        url = canon.canonicalize(raw)
    except canon.InvalidURL as exc:
        raise BanlistError("value", f"{raw!r} is not a valid {scope}: {exc}") from exc
    host, path, query = canon.split(url)
    is_ip = host.startswith("[") or canon.is_ipv4(host)
    if not is_ip and not _HOST_NAME.fullmatch(host):
        # what canonicalization keeps escaped ('*', spaces, bytes IDNA refuses) is no name a
        # result URL can have: the entry would be accepted and never match
        raise BanlistError("value", f"{host!r} is not a host name (letters, digits, '-', "
                           "'_' and dots; IDN hosts are written as they are or in punycode; "
                           "no wildcards: a domain entry covers every subdomain)")
    if scope == "url":
        return url_key(url)
    if scope == "prefix":
        if query:
            raise BanlistError("value", "a prefix is host and path, without a query")
        return host + path
    # a path the canonical form dropped (`a.com/x/..`) is still a path; the slashes that
    # lead a host after its scheme (`http:///a.com/`) are not
    if path != "/" or query or "/" in raw.split("://")[-1].strip("/"):
        raise BanlistError("value", f"a {scope} is a bare host name, got {raw!r}")
    if scope == "domain" and is_ip:
        raise BanlistError("value", f"{host} is an IP address, which has no subdomains: "
                           "ban it with scope host")
    if scope == "domain" and is_public_suffix(host):
        raise BanlistError("value", f"{host} is a public suffix: banning it would ban "
                           "every site registered under it")
    return host


def url_key(canonical_url: str) -> str:
    """Key of a canonical URL for `url` matching: without the scheme, so http and https match."""
    return canonical_url.partition("://")[2]


def group_name(name: str, field: str = "name") -> str:
    """The written form of an org group's name: lowercase letters, digits, '.', '_', '-'."""
    key = name.strip().lower()
    if not _GROUP_NAME.fullmatch(key):
        raise BanlistError(field, f"{name!r} is not a group name (1-64 of a-z 0-9 . _ -, "
                           "starting with a letter or digit)")
    return key


def group_domains(domains: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Normalized, de-duplicated domains of an org group; each must be a bannable domain."""
    if not domains:
        raise BanlistError("domains", "a group needs at least one domain")
    out: dict[str, None] = {}
    for n, raw in enumerate(domains):
        try:
            out[normalize("domain", raw)] = None
        except BanlistError as exc:
            raise BanlistError(f"domains[{n}]", exc.problem) from None
    return tuple(out)
