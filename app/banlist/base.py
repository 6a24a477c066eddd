"""What every banlist store offers (embedded or Redis-backed), and the validation they share."""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from iso3166 import countries_by_alpha2

from app.banlist.history import ENDS, ChangeFilter
from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso, normalize
from app.banlist.selection import Selection
from app.banlist.snapshot import Snapshot
from app.errors import BanlistConflict, BanlistError


@dataclass(frozen=True, slots=True)
class EntrySpec:
    """What a writer asks for; validated and normalized into an Entry by the store."""

    scope: str
    value: str
    reason: str
    regions: tuple[str, ...] = ()
    expires_at: float | None = None
    # who banned it, when that is not the writer: an export's line keeps its actor when
    # imported (the change log still records the importing token as the writer)
    actor: str | None = None


@dataclass(frozen=True, slots=True)
class EntryEdit:
    """What a writer asks to change of an active entry (app/banlist/edits.py): its expiry
    (`sets_expiry`; `expires_at` None makes it permanent) and its regions (None: as they
    are; empty: everywhere), and why. The id, scope, value, reason and actor stay."""

    reason: str
    sets_expiry: bool = False
    expires_at: float | None = None
    regions: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated spec: the entry minus the id and creation time, which the commit assigns."""

    scope: str
    value: str
    reason: str
    expires_at: float | None
    regions: frozenset[str]
    actor: str | None = None

    def entry(self, entry_id: str, actor: str, created_at: float) -> Entry:
        """The entry as committed by `actor` (unless the spec named who banned it)."""
        return Entry(entry_id, self.scope, self.value, self.reason, self.actor or actor,
                     created_at, self.expires_at, self.regions)

    @property
    def identity(self) -> tuple[str, str, frozenset[str]]:
        """What makes two bans the same ban (CONTRACT.md): scope, normalized value, regions."""
        return self.scope, self.value, self.regions


# ISO 3166-1 alpha-2: two ASCII letters, in any case (checked before upper-casing: "ß" is
# "SS" once upper-cased). An item holding several ("RU,KZ", "RU; KZ", "RU KZ") is split,
# on the single add and on import alike: kept whole it would name no region at all.
_REGION = re.compile(r"[A-Za-z]{2}")
_REGION_SEPARATORS = re.compile(r"[,;\s]+")


def regions_of(items: Iterable[str]) -> frozenset[str]:
    """Region codes of a spec, upper-cased and split at commas, semicolons and spaces;
    BanlistError naming `regions[n]` for an item that is not a list of alpha-2 codes."""
    out: set[str] = set()
    for n, item in enumerate(items):
        codes = [c for c in _REGION_SEPARATORS.split(item.strip()) if c]
        if not codes:
            raise BanlistError(f"regions[{n}]", "a region cannot be empty")
        for code in codes:
            if not _REGION.fullmatch(code):
                raise BanlistError(f"regions[{n}]", f"{code[:20].upper()!r} is not an ISO "
                                   "3166-1 alpha-2 code (two letters, such as RU or KZ)")
            if code.upper() not in countries_by_alpha2:  # UK, EU, XX: never a query's region
                raise BanlistError(f"regions[{n}]", f"{code.upper()!r} is not an assigned ISO "
                                   "3166-1 alpha-2 code (the United Kingdom is GB)")
        out.update(code.upper() for code in codes)
    return frozenset(out)


def identical(index: BanIndex, p: Prepared, now: float) -> Entry | None:
    """The oldest active entry identical to `p` (same scope, value and regions), if any."""
    for e in index.by_value(p.scope, p.value):
        if e.regions == p.regions and e.unexpired(now):
            return e
    return None


@dataclass(frozen=True, slots=True)
class Plan:
    """What a batch of adds does: `fresh` are committed; each spec's slot is either an entry
    already in the store or the position of its fresh entry (`dup`: the same ban was asked
    for earlier in this batch)."""

    fresh: list[Prepared]
    slots: list[Entry | tuple[int, bool]]

    def resolve(self, committed: list[Entry]) -> list[tuple[Entry, bool]]:
        """(entry, existing) per spec, in the order asked, once `fresh` is committed."""
        return [(s, True) if isinstance(s, Entry) else (committed[s[0]], s[1])
                for s in self.slots]


def plan(prepared: list[Prepared], index: BanIndex, now: float) -> Plan:
    """Which of `prepared` are new bans, which are already active entries (idempotent adds)."""
    fresh: list[Prepared] = []
    slots: list[Entry | tuple[int, bool]] = []
    seen: dict[tuple[str, str, frozenset[str]], Entry | int] = {}
    for p in prepared:
        key = p.identity
        if key in seen:
            prior = seen[key]
            slots.append(prior if isinstance(prior, Entry) else (prior, True))
            continue
        found = identical(index, p, now)
        if found is None:
            seen[key] = len(fresh)
            slots.append((len(fresh), False))
            fresh.append(p)
        else:
            seen[key] = found
            slots.append(found)
    return Plan(fresh, slots)


def still_banning(index: BanIndex, entry: Entry, now: float) -> list[Entry]:
    """Other active entries for the same scope and value as `entry` (say, after removing one
    of two duplicates an old log holds): the target stays banned by them."""
    return [e for e in index.by_value(entry.scope, entry.value)
            if e.id != entry.id and e.unexpired(now)]


MAX_REASON = 1000  # characters, as the single add (BanIn) takes them
MAX_VALUE = 8192


def prepare(spec: EntrySpec, now: float, groups: dict[str, tuple[str, ...]]) -> Prepared:
    """Validate and normalize a spec; BanlistError naming the field when it is refused.

    Every path that adds goes through here (the single add, import, seed files, sanctions),
    so the limits are the same on all of them."""
    if len(spec.value) > MAX_VALUE:
        raise BanlistError("value", f"{len(spec.value)} characters; at most {MAX_VALUE}")
    value = normalize(spec.scope, spec.value)
    reason = spec.reason.strip()
    if not reason:
        raise BanlistError("reason", "a reason is required (T&S must be able to answer why)")
    if spec.expires_at is not None and spec.expires_at <= now:
        raise BanlistError("expires_at", f"{iso(spec.expires_at)} is already in the past")
    if spec.scope == "org" and value not in groups:
        raise BanlistError("value", f"no org group named {value!r}: define it first "
                           "(PUT /v1/banlist/groups/{name})")
    if len(reason) > MAX_REASON:
        raise BanlistError("reason", f"{len(reason)} characters; at most {MAX_REASON}")
    regions = regions_of(spec.regions)
    return Prepared(spec.scope, value, reason, spec.expires_at, regions, spec.actor)


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """An org group as an import defines it: normalized name and members, and why."""

    name: str
    domains: tuple[str, ...]
    reason: str


def new_groups(groups: Iterable[GroupSpec],
               current: Mapping[str, tuple[str, ...]]) -> list[GroupSpec]:
    """The groups of an import that the store does not hold yet; one it holds with the same
    members (in any order) is a no-op, one it holds with other members a 409 naming it."""
    out = []
    for g in groups:
        held = current.get(g.name)
        if held is None:
            out.append(g)
        elif set(held) != set(g.domains):
            only_held = [d for d in held if d not in g.domains]
            only_new = [d for d in g.domains if d not in held]
            raise BanlistConflict("group", f"group {g.name!r} exists with other members ("
                                  f"held, not in the import: {_some(only_held)}; in the import, "
                                  f"not held: {_some(only_new)}): redefine it with PUT "
                                  f"/v1/banlist/groups/{g.name}, or drop it from the import; "
                                  "nothing imported", extra={"group": g.name})
    return out


def _some(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (", ".join(names[:shown]) or "none") + more


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
    # changes the source lost that other replicas hold and that are not back yet: this
    # copy lacks them, so it is not ready (app/banlist/redis/recovery.py)
    missing: str | None = None

    def as_dict(self, name: str = "banlist") -> dict[str, Any]:
        """The /readyz fields of this copy, each named `<name>_…` (`banlist_in_sync`, …)."""
        staleness = self.staleness_seconds
        fields = {"store": self.store, "in_sync": self.in_sync,
                  "staleness_seconds": None if staleness == float("inf") else round(staleness, 3),
                  "epoch": self.epoch, "diverged": self.diverged, "problem": self.problem,
                  "missing": self.missing, **self.details}
        return {f"{name}_{key}": value for key, value in fields.items()}


class BanStore(Protocol):
    """The banlist as the API, the request path and the tests see it, whatever backs it.

    `index` is read on the request path: a plain attribute, never a round trip to anything;
    each of its snapshots carries the version of the list it holds (`BanIndex.version`,
    published with the data), which is what a response reports. `version` is the store's.
    """

    @property
    def index(self) -> BanIndex: ...

    def follow_index(self, served: Callable[[BanIndex], None]) -> None:
        """Call `served` with the index served now and with each one swapped in later
        (changes applied to an index in place reach its holders without a call)."""

    @property
    def version(self) -> int: ...

    def __len__(self) -> int: ...

    def add(self, spec: EntrySpec, actor: str) -> Entry: ...

    def add_many(self, specs: list[EntrySpec], actor: str) -> list[Entry]: ...

    def put_many(self, specs: list[EntrySpec], actor: str) -> list[tuple[Entry, bool]]: ...

    def put_import(self, groups: Sequence[GroupSpec], specs: list[EntrySpec], actor: str
                   ) -> tuple[list[str], list[tuple[Entry, bool]]]: ...

    def remove(self, entry_id: str, actor: str, reason: str) -> Entry: ...

    def remove_matching(self, selection: Selection, actor: str, reason: str) -> int:
        """Lift every active entry `selection` takes as one batch (app/banlist/selection.py):
        a removal each in the history, the version moving once; how many."""
        ...

    def edit(self, entry_id: str, edit: EntryEdit, actor: str) -> tuple[Entry, bool]: ...

    def define_group(self, name: str, domains: list[str], actor: str,
                     reason: str) -> dict[str, Any]: ...

    def sweep(self) -> int: ...

    def seed(self, specs: Iterable[EntrySpec], actor: str = "seed",
             groups: Sequence[GroupSpec] = ()) -> int: ...

    def active(self) -> list[Entry]: ...

    def changes_since(self, seq: int, limit: int = 1000) -> list[dict[str, Any]]: ...

    def history(self, flt: ChangeFilter, since: int = 0, limit: int = 1000,
                before: int | None = None, newest: bool = False) -> list[dict[str, Any]]: ...

    def former(self, canonical: str, host: str) -> list[dict[str, Any]]: ...

    def history_since(self) -> str | None: ...

    def refresh(self) -> None: ...

    def sync_state(self) -> SyncState: ...

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]: ...

    def adopt(self) -> dict[str, Any]: ...

    def forget_loss(self, replica: str) -> dict[str, Any]: ...

    def write_state(self, write_id: str) -> dict[str, Any]: ...

    def dump(self) -> tuple[Snapshot, bytes]:
        """The banlist at one version and its bytes (app/banlist/snapshot.py)."""
        ...

    def start(self) -> None: ...

    def close(self) -> None: ...


# One change as BanIndex.apply takes it: ("add", Entry), ("remove", id) or
# ("group", name, domains). An `edit` is an add of the same id: the index replaces the
# entry it held under that id.
IndexChange = tuple[Any, ...]


def index_change(change: Mapping[str, Any]) -> IndexChange | None:
    """A logged change (the shape of `GET /v1/banlist/changes`, which both stores write) as
    the index applies it; None for one that holds no entry (a seed or reseed mark)."""
    op = change["op"]
    if op in ("add", "edit"):
        return ("add", Entry.from_dict(change["entry"]))
    if op == "group":
        return ("group", change["name"], tuple(change["domains"]))
    if op in ENDS:
        return ("remove", change["id"])
    return None


class FollowedIndex:
    """An `index` (the one the request path reads) whose every swap is told to whoever
    follows it (`follow_index`: the data port's listener); a batch applied to the index in
    place needs no telling. `_index_lock` is held while the index changes."""

    _index: BanIndex
    _index_lock: AbstractContextManager[Any]
    _followers: tuple[Callable[[BanIndex], None], ...] = ()

    @property
    def index(self) -> BanIndex:
        """The index served."""
        return self._index

    @index.setter
    def index(self, index: BanIndex) -> None:
        self._index = index
        for served in self._followers:
            served(index)

    def follow_index(self, served: Callable[[BanIndex], None]) -> None:
        """Call `served` with the index served now and with each one swapped in later."""
        with self._index_lock:  # no swap between the two: the last one published is served
            self._followers = (*self._followers, served)
            served(self._index)


class StoreBase(FollowedIndex, ABC):
    """What the embedded and the Redis store do alike, on top of each one's `put_import`.

    A store sets `index` (read on the request path), `clock`, and `_index_lock`, which it
    holds while it changes the index, so a reader iterating it sees no half-applied batch.
    """

    clock: Callable[[], float]  # epoch seconds

    def __len__(self) -> int:
        return len(self.index)

    @abstractmethod
    def put_import(self, groups: Sequence[GroupSpec], specs: list[EntrySpec], actor: str
                   ) -> tuple[list[str], list[tuple[Entry, bool]]]:
        """Commit the groups an import defines, then its entries, in one write; the names of
        the groups it defined and each entry with whether it is new (each store's own)."""

    def add(self, spec: EntrySpec, actor: str) -> Entry:
        """Validate, commit and index a new entry; returns it with its id (or the active
        entry identical to it, which makes the add a no-op)."""
        return self.put_many([spec], actor)[0][0]

    def add_many(self, specs: list[EntrySpec], actor: str) -> list[Entry]:
        return [entry for entry, _ in self.put_many(specs, actor)]

    def put_many(self, specs: list[EntrySpec], actor: str) -> list[tuple[Entry, bool]]:
        """Validate every spec first, then commit the new bans together (all or nothing);
        (entry, existing) per spec, `existing` when an identical entry was active already
        (nothing is written for it: no id, no change, no seq)."""
        return self.put_import((), specs, actor)[1]

    def active(self) -> list[Entry]:
        """Unexpired entries, oldest first (a copy, taken under the index's lock)."""
        now = self.clock()
        with self._index_lock:
            return [e for e in self.index if e.unexpired(now)]


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
