"""The sanctions service: score feed → state machine → ban and quarantine entries; appeals."""
from __future__ import annotations

import enum
import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import redis

from app.banlist.base import BanStore, EntrySpec
from app.banlist.model import normalize
from app.errors import BanlistError, Conflict, FieldError, Interrupted, NotFound
from app.sanctions import inherited
from app.sanctions.events import SanctionEvents
from app.sanctions.machine import (
    BANNED,
    QUARANTINE,
    HostState,
    Observation,
    Suppressed,
    Thresholds,
    Transition,
    clear,
    is_stale,
    observe,
    pin_text,
    suppression,
    when,
)
from app.sanctions.states import HostStates, to_dict

log = logging.getLogger(__name__)
ACTOR = "antispam"  # sanction-driven entries carry this actor, whoever fed the score
MAX_FUTURE_SECONDS = 300.0  # an observation from further in the future is a clock bug
APPEAL_PIN_SECONDS = 90 * 86400.0  # an appeal's immunity unless it says otherwise
# What a failing store raises: the banlist stores' own errors (Redis unreachable or out of
# memory, read-only), Redis's from the host states, the disk's from the embedded file.
STORE_ERRORS = (BanlistError, redis.RedisError, OSError)


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused feed item: its index, the field and the problem."""

    index: int
    field: str
    problem: str

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "field": self.field, "problem": self.problem}


class Sanctions:
    """Applies spam scores to per-host states and keeps ban/quarantine entries in line with them.

    Bans go to the banlist store and quarantines to a second store of the same kind, so
    both replicate to every replica like any entry. A state change is committed first;
    entries are then brought in line by `_reconcile`, which is idempotent, so a crash
    between the two is repaired by the host's next observation or appeal.
    """

    def __init__(self, states: HostStates, banlist: BanStore, quarantine: BanStore,
                 thresholds: Thresholds, events: SanctionEvents,
                 clock: Callable[[], float] = time.time,
                 appeal_pin_seconds: float = APPEAL_PIN_SECONDS) -> None:
        self.states = states
        self.banlist = banlist
        self.quarantine = quarantine
        self.thresholds = thresholds
        self.events = events
        self.clock = clock
        self.appeal_pin_seconds = appeal_pin_seconds

    def feed(self, items: list[dict[str, Any]], actor: str) -> dict[str, Any]:
        """Apply a batch in order; bad items are refused one by one, the rest applied.

        A failing store (Redis down or out of memory, a failing disk) stops the batch at the
        item it failed on: `Interrupted` then says, item by item, what was committed.
        """
        now = self.clock()
        valid: list[tuple[int, Observation]] = []
        refused: list[dict[str, Any]] = []
        for i, item in enumerate(items):
            try:
                valid.append((i, self._validate(item, now)))
            except FieldError as exc:
                refused.append(Refusal(i, exc.field, exc.problem).as_dict())
        out: dict[str, Any] = {"applied": 0, "stale": 0, "refused": refused,
                               "transitions": [], "suppressed": [], "not_applied": [],
                               "pending": []}
        for n, (i, obs) in enumerate(valid):
            try:
                applied = self.states.update(
                    obs.key, functools.partial(self._apply, obs=obs, now=now, actor=actor))
            except STORE_ERRORS as exc:
                rest = [j for j, _ in valid[n + 1:]]
                if may_have_landed(exc):
                    raise self._interrupted(out, exc, i, rest, pending=[i]) from exc
                raise self._interrupted(out, exc, i, [i, *rest], pending=[]) from exc
            if applied is _STALE:
                out["stale"] += 1
                self.events.sanction_stale()
                continue
            move, held = applied
            if held is not None:
                self._held_back(held)
                out["suppressed"].append({"index": i, **self._suppressed(held)})
            if move is not None:
                self.events.sanction_moved(move.from_state, move.to_state)
                out["transitions"].append({"key": obs.key, **move.as_dict()})
            try:
                self._reconcile(obs.key, move)
            except STORE_ERRORS as exc:  # the state is written, its entries not in line
                rest = [j for j, _ in valid[n + 1:]]
                raise self._interrupted(out, exc, i, rest, pending=[i]) from exc
            out["applied"] += 1
        return out

    @staticmethod
    def _interrupted(out: dict[str, Any], exc: Exception, at: int, not_applied: list[int],
                     pending: list[int]) -> Interrupted:
        out.update(not_applied=not_applied, pending=pending)
        if out["applied"] == 0 and not pending:
            outcome = "nothing was changed: feed the batch again"
        else:
            outcome = (f"{out['applied']} observations before it were applied, "
                       f"{len(not_applied)} (`not_applied`) were not, {len(pending)} "
                       "(`pending`) may be only in part: feed `not_applied` and `pending` "
                       "again (an observation fed twice changes nothing more)")
        return Interrupted(exc, f"stopped at observation {at}: {exc}; {outcome}", out)

    def appeal(self, key: str, actor: str, reason: str, pin_seconds: float | None = None,
               permanent: bool = False, force: bool = False) -> dict[str, Any]:
        """Clear a host: lift ban and quarantine, pin it clean for `pin_seconds` (by default
        the service's appeal immunity, 90 days) or, `permanent`, for good.

        A host the sanctions know nothing of (no score, no history) is refused (Conflict)
        unless `force`: clearing a typo would otherwise answer "pinned clean" for a host
        nobody meant, and immunize it. Once forced, its history holds the appeal.
        `Interrupted` if the store fails once the host is cleared but before its entries
        are lifted (an appeal sent again finishes the job)."""
        if not reason.strip():
            raise BanlistError("reason", "an appeal needs a reason")
        if permanent and pin_seconds is not None:
            raise BanlistError("permanent", "give pin_seconds or permanent, not both")
        now = self.clock()
        until = (math.inf if permanent else
                 now + (self.appeal_pin_seconds if pin_seconds is None else pin_seconds))

        def change(host: HostState) -> tuple[HostState, Transition]:
            if host.observed_at is None and not host.history and not force:
                raise Conflict("host", self._unobserved(key, until))
            return clear(host, now, until, actor, reason.strip())

        try:
            move = self.states.update(key, change)
        except STORE_ERRORS as exc:
            outcome = ("whether it was recorded is not known" if may_have_landed(exc)
                       else "nothing was changed")
            raise Interrupted(exc, f"the appeal of {key} failed ({exc}): {outcome}; send it "
                              "again", {"key": key, "cleared": None}) from exc
        self.events.sanction_moved(move.from_state, move.to_state)
        try:
            self._reconcile(key, move, actor=actor)
        except STORE_ERRORS as exc:
            raise Interrupted(exc, f"{key} is cleared and pinned, but its ban or quarantine "
                              f"entry could not be lifted yet ({exc}): send the appeal again",
                              {"key": key, "cleared": True}) from exc
        return self.describe(key)

    def describe(self, key: str) -> dict[str, Any]:
        """A host's state, pin and full history (GET /v1/sanctions/{host}); the sanction its
        pin holds back (`suppressed`), and what it inherits from its parent domains."""
        state, now = self.states.get(key), self.clock()
        out = to_dict(state)
        out["pinned"] = state.pinned(now)
        held = (suppression(state, state.score, self.thresholds, now)
                if state.score is not None else None)
        out["suppressed"] = None if held is None else self._suppressed(held)
        out["parents"] = [inherited.parent(p) for p in inherited.parents(self.states, key)]
        out["inherited"] = inherited.entries(key, self.banlist, self.quarantine, now)
        return out

    def _held_back(self, held: Suppressed) -> None:
        """A pinned host scoring high is counted (its alert) and logged with the host, which
        the counter cannot carry: T&S review the appeal that pinned it."""
        self.events.sanction_suppressed(held.would_be)
        log.warning("sanctions: %s is pinned clean, %s", held.key, held.why())

    @staticmethod
    def _suppressed(held: Suppressed) -> dict[str, Any]:
        """The feed's (and a host's) record of a sanction a pin held back."""
        forever = held.pinned_until == math.inf
        return {"key": held.key, "spam_score": held.score, "would_be": held.would_be,
                "why": held.why(), "pinned_until": None if forever else held.pinned_until,
                "pinned_forever": forever, "until": None if forever else when(held.pinned_until)}

    @staticmethod
    def _unobserved(key: str, until: float) -> str:
        return (f"{key} has no observation: the sanctions never scored it, so there is "
                f"nothing to clear (check the spelling). Forcing (`force`, the CLI's "
                f"--force) pins it clean {pin_text(until)} anyway: no score fed meanwhile "
                "can quarantine or ban it")

    def counts(self) -> dict[str, int]:
        """Hosts per state, for the metrics gauge."""
        counts = {"clean": 0, QUARANTINE: 0, BANNED: 0}
        for state in self.states:
            counts[state.state] += 1
        return counts

    def _validate(self, item: Any, now: float) -> Observation:
        if not isinstance(item, dict):
            raise FieldError("", "an observation is an object {host or domain, spam_score, "
                             "observed_at}")
        unknown = set(item) - {"host", "domain", "spam_score", "observed_at"}
        if unknown:
            raise FieldError(sorted(unknown)[0], "unknown field")
        scopes = [s for s in ("host", "domain") if item.get(s) is not None]
        if len(scopes) != 1:
            raise FieldError("host", "give exactly one of host or domain")
        scope = scopes[0]
        if not isinstance(item[scope], str):
            raise FieldError(scope, "must be a string")
        try:
            key = normalize(scope, item[scope])
        except BanlistError as exc:
            raise FieldError(scope, exc.problem) from None
        score = item.get("spam_score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not (
                math.isfinite(score) and 0.0 <= score <= 1.0):
            raise FieldError("spam_score", "must be a number in [0, 1]")
        at = item.get("observed_at")
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise FieldError("observed_at", "must be epoch seconds")
        if at > now + MAX_FUTURE_SECONDS:
            raise FieldError("observed_at", f"{at:.0f} ({when(at)}) is in the future (now "
                             f"{when(now)})")
        return Observation(key, scope, float(score), float(at))

    def _apply(self, host: HostState, obs: Observation, now: float, actor: str
               ) -> tuple[HostState, tuple[Transition | None, Suppressed | None]
                          | Literal[_Stale.STALE]]:
        if is_stale(host, obs):
            return host, _STALE
        held = suppression(host, obs.score, self.thresholds, now)
        new, move = observe(host, obs, self.thresholds, now, actor)
        return new, (move, held)

    def _reconcile(self, key: str, move: Transition | None, actor: str = ACTOR) -> None:
        """Make the ban and quarantine entries say what the state says (idempotent)."""
        state = self.states.get(key)
        why = move.reason if move is not None else f"state {state.state}"
        ban_id = self._sync(self.banlist, state, state.state == BANNED, actor, why)
        q_id = self._sync(self.quarantine, state, state.state == QUARANTINE, actor, why)
        if (ban_id, q_id) != (state.ban_entry_id, state.quarantine_entry_id):
            self.states.update(key, lambda h: (
                replace(h, ban_entry_id=ban_id, quarantine_entry_id=q_id), None))

    @staticmethod
    def _sync(store: BanStore, state: HostState, wanted: bool, actor: str,
              reason: str) -> str | None:
        """Add the one entry a sanction needs, or remove every entry it left.

        Entries are found by scope and value (actor `antispam`), not by a remembered id, and
        only after the store caught up with its source of truth: a replica a moment behind
        would otherwise add a second ban that no appeal removes.
        """
        store.refresh()
        mine = [e for e in store.index.by_value(state.scope, state.key) if e.actor == ACTOR]
        if wanted:
            if mine:
                return mine[0].id
            return store.add(EntrySpec(state.scope, state.key, reason), ACTOR).id
        for entry in mine:
            try:
                store.remove(entry.id, actor, reason)
            except NotFound:  # anything else (Redis down, a replica diverged): the caller's
                log.info("sanctions: entry %s of %s already gone", entry.id, state.key)
        return None


def may_have_landed(exc: Exception) -> bool:
    """Whether a state write that raised `exc` may still have been written: not when Redis
    refused it (out of memory, say); yes when its answer was lost or an fsync failed."""
    return not isinstance(exc, redis.ResponseError)


class _Stale(enum.Enum):
    """An observation older than the host's last one: dropped, counted as stale."""

    STALE = enum.auto()


_STALE: Literal[_Stale.STALE] = _Stale.STALE
