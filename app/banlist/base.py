"""What every banlist store offers (embedded or Redis-backed), and the validation they share."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso, normalize
from app.errors import BanlistError


@dataclass(frozen=True, slots=True)
class EntrySpec:
    """What a writer asks for; validated and normalized into an Entry by the store."""

    scope: str
    value: str
    reason: str
    regions: tuple[str, ...] = ()
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated spec: the entry minus the id and creation time, which the commit assigns."""

    scope: str
    value: str
    reason: str
    expires_at: float | None
    regions: frozenset[str]

    def entry(self, entry_id: str, actor: str, created_at: float) -> Entry:
        return Entry(entry_id, self.scope, self.value, self.reason, actor, created_at,
                     self.expires_at, self.regions)


def prepare(spec: EntrySpec, now: float, groups: dict[str, tuple[str, ...]]) -> Prepared:
    """Validate and normalize a spec; BanlistError naming the field when it is refused."""
    value = normalize(spec.scope, spec.value)
    reason = spec.reason.strip()
    if not reason:
        raise BanlistError("reason", "a reason is required (T&S must be able to answer why)")
    if spec.expires_at is not None and spec.expires_at <= now:
        raise BanlistError("expires_at", f"{iso(spec.expires_at)} is already in the past")
    if spec.scope == "org" and value not in groups:
        raise BanlistError("value", f"no org group named {value!r}: define it first "
                           "(PUT /v1/banlist/groups/{name})", status=422)
    regions = frozenset(r.strip().upper() for r in spec.regions)
    if any(not r for r in regions):
        raise BanlistError("regions", "a region cannot be empty")
    return Prepared(spec.scope, value, reason, spec.expires_at, regions)


MAX_TTL_SECONDS = 10 * 365 * 86400


def expiry(ttl_seconds: float | None, expires_at: float | None, now: float) -> float | None:
    """Epoch seconds an entry expires at, from a TTL or an absolute time (never both)."""
    if ttl_seconds is not None and expires_at is not None:
        raise BanlistError("ttl_seconds", "give ttl_seconds or expires_at, not both")
    if ttl_seconds is None:
        return expires_at
    if not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise BanlistError("ttl_seconds", "between 1 second and 10 years")
    return now + ttl_seconds


def require_reason(reason: str, what: str) -> str:
    text = reason.strip()
    if not text:
        raise BanlistError("reason", f"a reason is required for {what}")
    return text


@dataclass(slots=True)
class SyncState:
    """How a store's copy relates to its source of truth (for /readyz and /metrics)."""

    store: str
    in_sync: bool = True
    staleness_seconds: float = 0.0
    epoch: int = 0
    diverged: str | None = None  # why the source of truth was refused (went backwards)
    problem: str | None = None  # the last connection/replication problem
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"banlist_store": self.store, "banlist_in_sync": self.in_sync,
                "banlist_staleness_seconds": round(self.staleness_seconds, 3),
                "banlist_epoch": self.epoch, "banlist_diverged": self.diverged,
                "banlist_problem": self.problem, **self.details}


class BanStore(Protocol):
    """The banlist as the API, the request path and the tests see it, whatever backs it.

    `index` and `version` are read on the request path: plain attributes, swapped whole,
    never a round trip to anything.
    """

    index: BanIndex
    version: int

    def __len__(self) -> int: ...

    def add(self, spec: EntrySpec, actor: str) -> Entry: ...

    def add_many(self, specs: list[EntrySpec], actor: str) -> list[Entry]: ...

    def remove(self, entry_id: str, actor: str, reason: str) -> Entry: ...

    def define_group(self, name: str, domains: list[str], actor: str,
                     reason: str) -> dict[str, Any]: ...

    def sweep(self) -> int: ...

    def seed(self, specs: Iterable[EntrySpec], actor: str = "seed") -> int: ...

    def active(self) -> list[Entry]: ...

    def changes_since(self, seq: int, limit: int = 1000) -> list[dict[str, Any]]: ...

    def refresh(self) -> None: ...

    def sync_state(self) -> SyncState: ...

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]: ...

    def adopt(self) -> dict[str, Any]: ...

    def write_state(self, write_id: str) -> dict[str, Any]: ...

    def start(self) -> None: ...

    def close(self) -> None: ...


def validate_all(specs: list[EntrySpec], now: float,
                 groups: dict[str, tuple[str, ...]]) -> list[Prepared]:
    """Every spec prepared, or BanlistError for the first refused one (field `[n].field`)."""
    out = []
    for n, spec in enumerate(specs):
        try:
            out.append(prepare(spec, now, groups))
        except BanlistError as exc:
            raise BanlistError(f"[{n}].{exc.field}", exc.problem) from None
    return out
