"""Where host sanction states live: a JSON-lines file (embedded) or a Redis hash."""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import redis

from app.banlist.base import SyncState, require_reason
from app.banlist.events import StoreEvents
from app.banlist.redis.client import TextRedis
from app.banlist.redis.durable import Durability
from app.banlist.redis.policy import EvictionPolicy
from app.errors import BanlistConflict, BanlistUnavailable, RearrangeError
from app.sanctions.machine import HostState, Transition

log = logging.getLogger(__name__)

T = TypeVar("T")
HISTORY_LIMIT = 500  # transitions kept per host; older ones stay in the banlist change log


class HostStates(Protocol):
    """Read-modify-write of one host's state, atomic against other writers."""

    def get(self, key: str) -> HostState: ...

    def update(self, key: str, change: Callable[[HostState], tuple[HostState, T]]) -> T: ...

    def __iter__(self) -> Iterator[HostState]: ...

    def check(self) -> None: ...

    def sync_state(self) -> SyncState: ...

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]: ...

    def adopt(self) -> dict[str, Any]: ...


def to_dict(state: HostState) -> dict[str, Any]:
    """JSON form of a host state (an infinite pin is written as null + permanent)."""
    permanent = state.pinned_until == float("inf")
    return {
        "key": state.key, "scope": state.scope, "state": state.state, "score": state.score,
        "observed_at": state.observed_at,
        "pinned_until": None if permanent else state.pinned_until, "pinned_forever": permanent,
        "ban_entry_id": state.ban_entry_id, "quarantine_entry_id": state.quarantine_entry_id,
        "history": [t.as_dict() for t in state.history[-HISTORY_LIMIT:]],
    }


def from_dict(data: dict[str, Any]) -> HostState:
    """Inverse of to_dict."""
    pinned = float("inf") if data.get("pinned_forever") else data.get("pinned_until")
    history = tuple(Transition(t["at"], t["from"], t["to"], t["score"], t["actor"], t["reason"])
                    for t in data.get("history", ()))
    return HostState(data["key"], data.get("scope", "host"), data["state"], data.get("score"),
                     data.get("observed_at"), pinned, data.get("ban_entry_id"),
                     data.get("quarantine_entry_id"), history)


class FileStates:
    """Embedded: states in memory, each change appended (fsynced) to a JSON-lines file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._states: dict[str, HostState] = {}
        self._lock = threading.Lock()
        if path is not None and path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            for n, line in enumerate(lines, 1):
                try:
                    state = from_dict(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    if n == len(lines):
                        break  # a torn last line: the write was never acknowledged
                    raise RearrangeError(f"{path}:{n}: not a sanction state ({exc})") from exc
                self._states[state.key] = state

    def get(self, key: str) -> HostState:
        return self._states.get(key) or HostState(key)

    def update(self, key: str, change: Callable[[HostState], tuple[HostState, T]]) -> T:
        with self._lock:
            new, result = change(self.get(key))
            if new != self._states.get(key):
                self._write(new)
                self._states[key] = new
            return result

    def __iter__(self) -> Iterator[HostState]:
        return iter(list(self._states.values()))

    def check(self) -> None:
        """The file is this process's own: nothing to check."""

    def sync_state(self) -> SyncState:
        return SyncState("embedded")

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]:
        raise BanlistConflict("sanctions", "embedded sanction states have no Redis to reseed")

    def adopt(self) -> dict[str, Any]:
        raise BanlistConflict("sanctions", "embedded sanction states have no Redis to adopt")

    def _write(self, state: HostState) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(to_dict(state), ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


class RedisStates:
    """States in one Redis hash; updates are optimistic transactions (WATCH/MULTI) per host.

    Guarded as the lists are: the first update creates an epoch key beside the hash (ms of
    Redis's clock), this process remembers the epoch it follows, and a Redis whose epoch is
    gone (restarted empty, flushed) or another one is refused. Updates then answer 503 and
    reads come from this process's copy (the last full reading, plus what it read and wrote
    since) until an operator reseeds that copy into Redis or adopts what Redis holds.
    """

    def __init__(self, client: TextRedis, prefix: str, events: StoreEvents,
                 policy: EvictionPolicy, durability: Durability,
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        base = f"{prefix}{{sanctions}}:"
        self.key, self.epoch_key, self.reseed_key = base + "hosts", base + "epoch", base + "reseed"
        self.durable_key = base + "durable"  # what a write's WAIT writes after it
        self.durability = durability
        self.events = events
        self.policy = policy
        self.clock = clock
        self.epoch: str | None = None  # the history this process follows (None: none seen yet)
        self.copy: dict[str, str] = {}  # host → its JSON: what a reseed writes back
        self.read_at: float | None = None  # when the copy was last read whole
        self.confirmed_at = 0.0  # when Redis was last seen holding the epoch followed
        self.diverged: str | None = None
        self.problem: str | None = None
        self._lock = threading.Lock()  # the copy and the epoch, against concurrent updates

    # ---- reads and writes --------------------------------------------------------------------
    def get(self, key: str) -> HostState:
        raw = self._round(lambda p: p.hget(self.key, key))
        if raw is _REFUSED:
            raw = self.copy.get(key)
        else:
            self._keep(key, raw)
        return from_dict(json.loads(raw)) if raw else HostState(key)

    def update(self, key: str, change: Callable[[HostState], tuple[HostState, T]]) -> T:
        if self.policy.problem:
            raise BanlistUnavailable("sanctions", f"sanction writes are suspended: "
                                     f"{self.policy.problem}")
        while True:
            with self.client.pipeline() as pipe:
                try:
                    pipe.watch(self.key, self.epoch_key, self.reseed_key)
                    epoch_r = pipe.get(self.epoch_key)
                    if not self._judge(pipe, epoch_r):
                        raise BanlistUnavailable("sanctions", self.why_refused())
                    raw = pipe.hget(self.key, key)
                    old = from_dict(json.loads(raw)) if raw else HostState(key)
                    new, result = change(old)
                    created = None if epoch_r else _epoch(pipe.time())
                    pipe.multi()
                    if created:
                        pipe.set(self.epoch_key, created)
                    text = json.dumps(to_dict(new), ensure_ascii=False) if new != old else raw
                    if new != old:
                        pipe.hset(self.key, key, text)
                    pipe.execute()
                except redis.WatchError:
                    continue  # another writer changed the hash: read again and retry
                except redis.RedisError as exc:
                    self._unreachable(exc)
                    raise
            self._reached()
            with self._lock:
                if created:
                    self.epoch = created
                self._keep(key, text)
            self.durability.confirm(self.client, self.durable_key, "sanctions")
            return result

    def __iter__(self) -> Iterator[HostState]:
        """Every host's state: Redis's, read whole (the copy, while Redis's is refused)."""
        got = self._round(lambda p: p.hgetall(self.key))
        if got is not _REFUSED:
            with self._lock:
                self.copy, self.read_at = got, self.clock()
        for raw in list(self.copy.values()):
            yield from_dict(json.loads(raw))

    def check(self) -> None:
        """One cheap round trip (the epoch), so a Redis that lost the states is noticed without
        waiting for a write (the housekeeping loop calls it)."""
        try:
            self._round(lambda p: p.exists(self.key))
        except redis.RedisError:
            return  # counted and logged once by _round

    # ---- divergence ----------------------------------------------------------------------------
    def _round(self, read: Callable[[Any], Any]) -> Any:
        """Read the epoch and `read` in one MULTI; _REFUSED when Redis's states are refused."""
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.get(self.epoch_key)
            read(pipe)
            epoch_r, got = pipe.execute()
            ok = self._judge(self.client, epoch_r)
        except redis.RedisError as exc:
            self._unreachable(exc)
            raise
        self._reached()
        return got if ok else _REFUSED

    def _judge(self, client: Any, epoch_r: str | None) -> bool:
        """True when Redis holds the history this process follows (taking the first it sees)."""
        with self._lock:
            if self.epoch is None or epoch_r == self.epoch:
                self.epoch = self.epoch or epoch_r
                if self.diverged:
                    log.warning("sanctions: Redis holds this replica's sanction states again")
                self.diverged, self.confirmed_at = None, self.clock()
                return True
            reseed = client.get(self.reseed_key) if epoch_r else None
            if reseed and json.loads(reseed).get("over") == self.epoch:
                log.warning("sanctions: Redis was reseeded over this replica's sanction states "
                            "(epoch %s → %s); following it", self.epoch, epoch_r)
                self.epoch, self.diverged, self.confirmed_at = epoch_r, None, self.clock()
                return True
            if epoch_r is None:
                why, cause = (f"Redis holds no sanction states (restarted empty or flushed) but "
                              f"this replica followed epoch {self.epoch}"), "lost"
            else:
                why, cause = (f"Redis holds another sanction-state history (epoch {epoch_r}) "
                              f"than this replica (epoch {self.epoch})"), "backward"
            if why != self.diverged:
                log.error("sanctions: refusing Redis's sanction states, answering from this "
                          "replica's copy of %d hosts: %s. Run `rearrange banlist reseed "
                          "--store sanctions` against the replica with the copy to keep, or "
                          "adopt Redis's (POST /v1/admin/sanctions/adopt).", len(self.copy), why)
                self.events.refused("sanctions", cause)
                self.diverged = why
            return False

    def why_refused(self) -> str:
        return (f"sanction writes are suspended: {self.diverged}; reseed this replica's copy "
                f"(POST /v1/admin/sanctions/reseed) or adopt Redis's")

    def _keep(self, key: str, raw: str | None) -> None:
        if raw is None:
            self.copy.pop(key, None)
        else:
            self.copy[key] = raw

    def _reached(self) -> None:
        if self.problem is not None:
            log.warning("sanctions: Redis reachable again")
        self.problem = None

    def _unreachable(self, exc: redis.RedisError) -> None:
        if self.problem is None:
            log.warning("sanctions: Redis unreachable: %s", exc)
        self.problem = f"Redis unreachable: {exc}"
        self.events.redis_error("sanctions")

    def sync_state(self) -> SyncState:
        now = self.clock()
        staleness = now - self.confirmed_at if self.confirmed_at else float("inf")
        age = None if self.read_at is None else round(now - self.read_at, 3)
        return SyncState("redis", self.diverged is None and self.problem is None, staleness,
                         int(self.epoch or 0), self.diverged, self.problem,
                         {"hosts": len(self.copy), "copy_age_seconds": age})

    # ---- operator repairs ----------------------------------------------------------------------
    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]:
        """Write this replica's copy back into Redis (after Redis lost or replaced the states)."""
        why = require_reason(reason, "a reseed")
        if self.epoch is None:
            raise BanlistConflict("sanctions", "this replica follows no sanction states to reseed "
                                  "from")
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(self.key, self.epoch_key)
                current = pipe.get(self.epoch_key)
                if current == self.epoch and self.diverged is None:
                    raise BanlistConflict("sanctions", "Redis holds the sanction states this "
                                          "replica follows: nothing to reseed")
                if current is not None and current != self.epoch and not force:
                    raise BanlistConflict("force", f"Redis holds another sanction-state history "
                                          f"(epoch {current}, replica {self.epoch}; written after "
                                          f"a loss?); pass force to overwrite it")
                with self._lock:
                    copy, epoch = dict(self.copy), self.epoch
                pipe.multi()
                pipe.delete(self.key)
                items = list(copy.items())
                for start in range(0, len(items), 5000):
                    pipe.hset(self.key, mapping=dict(items[start:start + 5000]))
                pipe.set(self.epoch_key, epoch)
                pipe.set(self.reseed_key, json.dumps({"over": current, "epoch": epoch,
                                                      "actor": actor, "reason": why}))
                pipe.execute()
            except redis.WatchError:
                raise BanlistConflict("sanctions", "Redis's sanction states changed while the "
                                      "copy was written: check again") from None
            except redis.RedisError as exc:
                self._unreachable(exc)
                raise BanlistUnavailable("sanctions",
                                         f"Redis unreachable, not reseeded: {exc}") from exc
        with self._lock:
            self.diverged, self.confirmed_at = None, self.clock()
        self.durability.confirm(self.client, self.durable_key, "sanctions")
        log.warning("sanctions: %s reseeded Redis with %d host states (epoch %s, replacing %s): "
                    "%s", actor, len(copy), epoch, current or "none", why)
        return {"hosts": len(copy), "epoch": int(epoch), "replaced": {
            "epoch": int(current) if current else None}}

    def adopt(self) -> dict[str, Any]:
        """Accept what Redis holds now, even if it lost this replica's states (operator call)."""
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.get(self.epoch_key)
            pipe.hgetall(self.key)
            epoch_r, got = pipe.execute()
        except redis.RedisError as exc:
            self._unreachable(exc)
            raise BanlistUnavailable("sanctions", f"Redis unreachable, not adopted: {exc}") from exc
        with self._lock:
            self.epoch, self.copy, self.read_at = epoch_r, got, self.clock()
            self.diverged, self.confirmed_at = None, self.clock()
        log.warning("sanctions: adopted Redis's sanction states (epoch %s, %d hosts)",
                    epoch_r or "none", len(got))
        return {"epoch": int(epoch_r) if epoch_r else None, "hosts": len(got)}


def _epoch(time_reply: tuple[int, int]) -> str:
    """An epoch from Redis's clock, in ms, as the lists name theirs."""
    seconds, micros = time_reply
    return str(seconds * 1000 + micros // 1000)


_REFUSED = object()
