"""Where host sanction states live: a JSON-lines file (embedded) or a Redis hash."""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

import orjson
import redis

from app.banlist.base import SyncState, require_reason
from app.banlist.events import StoreEvents
from app.banlist.model import iso
from app.banlist.redis import recovery
from app.banlist.redis.client import TextRedis
from app.banlist.redis.durable import Durability
from app.banlist.redis.follower import Follower
from app.banlist.redis.policy import EvictionPolicy
from app.errors import BanlistConflict, BanlistNotFound, BanlistUnavailable, RearrangeError
from app.sanctions.machine import HostState, Transition

log = logging.getLogger(__name__)

T = TypeVar("T")
HISTORY_LIMIT = 500  # transitions kept per host; older ones stay in the banlist change log
JOURNAL = 10_000  # this replica's own last writes, kept to write again what Redis loses


class HostStates(Protocol):
    """Read-modify-write of one host's state, atomic against other writers."""

    def get(self, key: str) -> HostState: ...

    def update(self, key: str, change: Callable[[HostState], tuple[HostState, T]]) -> T: ...

    def __iter__(self) -> Iterator[HostState]: ...

    def start(self) -> None: ...

    def close(self) -> None: ...

    def sync_state(self) -> SyncState: ...

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]: ...

    def adopt(self) -> dict[str, Any]: ...

    def forget_loss(self, replica: str) -> dict[str, Any]: ...


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

    def start(self) -> None:
        """The file is this process's own: nothing to follow."""

    def close(self) -> None:
        """Every write is fsynced as it is made: nothing to flush."""

    def sync_state(self) -> SyncState:
        return SyncState("embedded")

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]:
        raise BanlistConflict("sanctions", "embedded sanction states have no Redis to reseed")

    def forget_loss(self, replica: str) -> dict[str, Any]:
        raise BanlistConflict("sanctions", "embedded sanction states have no Redis to lose "
                              "writes")

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


class Written(NamedTuple):
    """One of this replica's writes, as its journal keeps it: the changes-stream record that
    numbers it, the host, and the host's JSON before and after (None: no state)."""

    sid: str
    key: str
    before: str | None
    after: str


class RedisStates(Follower):
    """States in one Redis hash; updates are optimistic transactions (WATCH/MULTI) per host,
    each numbered by a record of a changes stream beside the hash; follower.py runs the
    rounds that check where Redis is.

    Guarded as the lists are: the first update creates an epoch key beside the hash (ms of
    Redis's clock), this process remembers the epoch it follows, and a Redis whose epoch is
    gone (restarted empty, flushed) or another one is refused. Updates then answer 503 and
    reads come from this process's copy (the last full reading, plus what it read and wrote
    since) until an operator reseeds that copy into Redis or adopts what Redis holds.

    Redis can also lose the last writes and keep its epoch (a failover to a Redis replica
    that had not received them, a restore from an older copy). Every update adds a record to
    `<prefix>{sanctions}:changes` (host and replica; kept to JOURNAL records), and this
    process remembers the newest record it has seen there: when Redis no longer holds it,
    writes were lost. This replica's own lost writes are in its journal (the host's JSON
    before and after each): it marks the loss in `<prefix>{sanctions}:lost` (every replica
    reports the sanction states not in sync while a mark is there), writes each again unless
    a later write to that host superseded it, and drops its mark. When its journal does not
    reach back far enough to tell, it refuses Redis's states as on an epoch change, and the
    operator's repair is the same (reseed or adopt).
    """

    round_op = "sanctions"

    def __init__(self, client: TextRedis, prefix: str, events: StoreEvents,
                 policy: EvictionPolicy, durability: Durability,
                 clock: Callable[[], float] = time.time, block_seconds: float = 1.0) -> None:
        super().__init__(client, "sanctions", block_seconds, events.redis_error, durability)
        base = f"{prefix}{{sanctions}}:"
        self.key, self.epoch_key, self.reseed_key = base + "hosts", base + "epoch", base + "reseed"
        self.changes_key, self.lost_key = base + "changes", base + "lost"
        self.durable_key = base + "durable"  # what a write's WAIT writes after it
        self.durability: Durability = durability
        self.events = events
        self.policy = policy
        self.clock = clock
        self.epoch: str | None = None  # the history this process follows (None: none seen yet)
        self.copy: dict[str, str] = {}  # host → its JSON: what a reseed writes back
        self.read_at: float | None = None  # when the copy was last read whole
        self.confirmed_at = 0.0  # when Redis was last seen holding the epoch followed
        self.diverged: str | None = None
        # the newest changes record seen in Redis, the newest this replica wrote, its
        # writes that Redis may still lose, and the newest own write the journal let go of
        self.seen: str | None = None
        self.own: str | None = None
        self.journal: deque[Written] = deque(maxlen=JOURNAL)
        self.forgotten = "0-0"
        self.history = 0  # moved on by a reseed or an adopt: a round under way reads anew
        self.me = f"{recovery.replica_name()}/sanctions/{id(self):x}"
        self.marks: dict[str, str] = {}  # every replica's loss marks, read each round
        self.mark_watch = recovery.MarkWatch()  # which of them their holders still refresh
        self._marked = False
        self._mark_doc: dict[str, Any] = {}
        self.unknown_loss: str | None = None  # lost writes the journal cannot tell: refused
        self._lock = threading.Lock()  # the copy, the epoch and the journal

    # ---- life cycle (follower.py) ------------------------------------------------------------
    def start(self) -> None:
        """Learn the epoch and the newest write Redis holds now, then follow them."""
        self.follow()

    def close(self) -> None:
        self.halt()

    def round(self, block: bool) -> None:
        """The primary, the epoch, the newest write and the loss marks, in one request;
        writes Redis lost are put back (this replica's) or refused (when it cannot tell).

        Two records must still be there: the newest this replica saw in Redis (another
        replica's writes up to it) and the newest it wrote (its own since). A reseed or an
        adopt meanwhile (`history` moved on) voids what this round read."""
        with self._lock:
            points, history = [p for p in (self.seen, self.own) if p is not None], self.history
        pipe = self.client.pipeline(transaction=True)
        pipe.execute_command("ROLE")
        pipe.get(self.epoch_key)
        pipe.hgetall(self.lost_key)
        pipe.xrange(self.changes_key, count=1)
        pipe.xrevrange(self.changes_key, count=1)
        for point in points:
            pipe.xrevrange(self.changes_key, max=point, min="-", count=1)
        role, epoch_r, marks, first, newest, *mine = pipe.execute()
        self.primary(role)
        self.policy.watch(self.client, reconnected=not self.connected)
        self.durability.watch(self.client, reconnected=not self.connected)
        self.marks = marks
        self.mark_watch.saw(marks)
        if self._judge(self.client, epoch_r):
            if history == self.history:
                self._follow(list(zip(points, mine, strict=True)), first, newest)
        elif self._marked and self._mark_doc:
            self._mark(**self._mark_doc)  # refreshed: other replicas see this one is alive
        self.reached()
        if block:
            self.wait(self.block_ms / 1000)

    def _follow(self, checks: list[tuple[str, list[Any]]], first: list[Any],
                newest: list[Any]) -> None:
        """Move on to Redis's newest write, unless a record this replica knew Redis held
        (read before this round's request) is gone: a loss, Redis's history holding only
        up to the newest record at or before it (the branch)."""
        gone = [(point, got) for point, got in checks if not got or got[0][0] != point]
        if gone:
            point = min((p for p, _ in gone), key=_pos)
            if first and _pos(first[0][0]) > _pos(point):
                log.info("sanctions: more than %d writes since this replica last looked: "
                         "whether Redis lost any cannot be told", JOURNAL)
            else:
                branch = min((got[0][0] if got else "0-0" for _, got in gone), key=_pos)
                self._recover(branch)
                return
        if self._marked and self.diverged is None:
            self._unmark()  # a mark whose removal failed once: nothing is missing any more
        if newest:
            with self._lock:
                if self.seen is None or _pos(newest[0][0]) > _pos(self.seen):
                    self.seen = newest[0][0]

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
                        self._number(pipe, key)
                    done = pipe.execute()
                except redis.WatchError:
                    continue  # another writer changed the hash: read again and retry
                except redis.RedisError as exc:
                    self.failed(exc, "sanctions")
                    raise
            self.reached()
            with self._lock:
                if created:
                    self.epoch = created
                self._keep(key, text)
                if new != old and text is not None:
                    self._wrote(Written(done[-1], key, raw, text))
            self.durability.confirm(self.client, self.durable_key, "sanctions")
            return result

    def _number(self, pipe: Any, key: str) -> None:
        """The changes record of a write to `key`, queued in its transaction."""
        pipe.xadd(self.changes_key, {"key": key, "by": self.me}, maxlen=JOURNAL,
                  approximate=True)

    def _wrote(self, written: Written) -> None:
        """Journal one of this replica's writes (under the lock); the next round checks
        that Redis still holds the newest of them."""
        if len(self.journal) == self.journal.maxlen:
            self.forgotten = self.journal[0].sid
        self.journal.append(written)
        if self.own is None or _pos(written.sid) > _pos(self.own):
            self.own = written.sid

    def __iter__(self) -> Iterator[HostState]:
        """Every host's state: Redis's, read whole (the copy, while Redis's is refused)."""
        got = self._round(lambda p: p.hgetall(self.key))
        if got is not _REFUSED:
            with self._lock:
                self.copy, self.read_at = got, self.clock()
        for raw in list(self.copy.values()):
            yield from_dict(json.loads(raw))

    # ---- writes Redis lost ----------------------------------------------------------------------
    def _recover(self, branch: str) -> None:
        """Redis no longer holds the newest write this replica saw: it holds its history up
        to `branch` only. This replica's own writes after it are written again (each unless
        a later write to its host superseded it); when the journal does not reach back to
        the branch, Redis's states are refused instead (the operator's repair)."""
        with self._lock:
            lost = [w for w in self.journal if _pos(w.sid) > _pos(branch)]
            blind = _pos(self.forgotten) > _pos(branch)
        held = self._held([w.sid for w in lost])
        lost = [w for w in lost if w.sid not in held]
        why = (f"Redis lost sanction writes this replica saw (the newest it holds is {branch}, "
               f"this replica saw {self.seen}): a failover to a lagging Redis replica, or a "
               "restore from an older copy")
        self._mark(why, len(lost), blind)
        if blind:
            why = (f"{why}; this replica's journal does not reach back to {branch}, so which "
                   "of its writes were lost cannot be told")
            with self._lock:
                self.unknown_loss = why
            self._refuse(why, "backward")
            self.events.recovered("sanctions", "operator", 0)
            return
        log.warning("sanctions: %s; writing again the %d of them this replica made (the "
                    "replica that made any other writes them again)", why, len(lost))
        superseded = sum(0 if self._rewrite(w) else 1 for w in lost)
        if lost:  # counted by the replica whose writes they were: once per loss
            self.durability.confirm(self.client, self.durable_key, "sanctions")
            self.events.recovered("sanctions", "reapplied", len(lost) - superseded)
        with self._lock:
            self.journal = deque((w for w in self.journal if w not in lost),
                                 maxlen=JOURNAL)
            self.seen = None  # the next round moves on to Redis's newest write
            self.own = self.journal[-1].sid if self.journal else None
        self._unmark()
        log.warning("sanctions: wrote back %d lost write(s)%s", len(lost) - superseded,
                    f"; {superseded} superseded by a later write to the same host, not "
                    "written" if superseded else "")

    def _held(self, sids: list[str]) -> set[str]:
        """Which of these changes records Redis still holds."""
        pipe = self.client.pipeline(transaction=False)
        for sid in sids:
            pipe.xrange(self.changes_key, min=sid, max=sid, count=1)
        return {sid for sid, got in zip(sids, pipe.execute(), strict=True) if got}

    def _rewrite(self, w: Written) -> bool:
        """Write a lost write again if the host still holds what it held before it (False:
        a later write to the host, made after the loss, superseded it)."""
        while True:
            with self.client.pipeline() as pipe:
                try:
                    pipe.watch(self.key)
                    if pipe.hget(self.key, w.key) != w.before:
                        log.info("sanctions: a lost write to %s was superseded by a later "
                                 "one; not written again", w.key)
                        return False
                    pipe.multi()
                    pipe.hset(self.key, w.key, w.after)
                    self._number(pipe, w.key)
                    done = pipe.execute()
                except redis.WatchError:
                    continue
            with self._lock:
                self._keep(w.key, w.after)
                self._wrote(w._replace(sid=done[-1]))
            return True

    def _mark(self, why: str, writes: int, blind: bool) -> None:
        self._mark_doc = {"why": why, "writes": writes, "blind": blind}
        doc = {"replica": self.me, "why": why, "writes": writes, "at": iso(self.clock()),
               "repair": "rearrange banlist reseed --store sanctions --reason … against this "
               "replica (or adopt Redis's states on it to accept the loss)" if blind else
               "re-applying them"}
        self.client.hset(self.lost_key, self.me, orjson.dumps(doc).decode())
        self._marked = True

    def forget_loss(self, replica: str) -> dict[str, Any]:
        """An operator's repair for a holder gone for good: its mark goes, and the writes it
        held are accepted as lost (BanlistNotFound when it holds no mark)."""
        if replica == self.me:
            raise BanlistConflict("replica", "that is this replica's own mark: adopt Redis's "
                                  "states on it (POST /v1/admin/sanctions/adopt) or reseed")
        doc = recovery.forget(self.client, self.lost_key, replica)
        if doc is None:
            raise BanlistNotFound("replica", f"no sanctions loss mark of {replica!r} "
                                  "(/readyz's sanctions_missing names the marks)")
        self.marks.pop(replica, None)
        return doc

    def _unmark(self) -> None:
        if self._marked:
            self.client.hdel(self.lost_key, self.me)
        self._marked = False

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
            self.failed(exc, "sanctions")
            raise
        self.reached()
        return got if ok else _REFUSED

    def _judge(self, client: Any, epoch_r: str | None) -> bool:
        """True when Redis holds the history this process follows (taking the first it sees)."""
        with self._lock:
            if self.epoch is None or epoch_r == self.epoch:
                if self.unknown_loss is not None:
                    return False  # refused over lost writes: until a reseed or an adopt
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
                self._new_history()
                return True
            if epoch_r is None:
                why, cause = (f"Redis holds no sanction states (restarted empty or flushed) but "
                              f"this replica followed epoch {self.epoch}"), "lost"
            else:
                why, cause = (f"Redis holds another sanction-state history (epoch {epoch_r}) "
                              f"than this replica (epoch {self.epoch})"), "backward"
        self._refuse(why, cause)
        return False

    def _new_history(self) -> None:
        """A reseed or an adopt (under the lock): what Redis holds is the history from now
        on, and what this replica knew of the one before (its writes, the records it saw,
        a loss it could not tell) no longer counts; a round under way reads anew."""
        self.unknown_loss, self.seen, self.own = None, None, None
        self.journal.clear()
        self.forgotten = "0-0"
        self.history += 1

    def _refuse(self, why: str, cause: str) -> None:
        with self._lock:
            if why == self.diverged:
                return
            self.diverged = why
        log.error("sanctions: refusing Redis's sanction states, answering from this "
                  "replica's copy of %d hosts: %s. Run `rearrange banlist reseed "
                  "--store sanctions` against the replica with the copy to keep, or "
                  "adopt Redis's (POST /v1/admin/sanctions/adopt).", len(self.copy), why)
        self.events.refused("sanctions", cause)

    def why_refused(self) -> str:
        return (f"sanction writes are suspended: {self.diverged}; reseed this replica's copy "
                f"(POST /v1/admin/sanctions/reseed) or adopt Redis's")

    def _keep(self, key: str, raw: str | None) -> None:
        if raw is None:
            self.copy.pop(key, None)
        else:
            self.copy[key] = raw

    def sync_state(self) -> SyncState:
        now = self.clock()
        staleness = now - self.confirmed_at if self.confirmed_at else float("inf")
        age = None if self.read_at is None else round(now - self.read_at, 3)
        # another replica's mark: writes Redis lost that it holds and has not put back yet
        missing = recovery.missing({k: v for k, v in self.marks.items() if k != self.me},
                                   "sanctions", self.mark_watch.ages())
        in_sync = self.diverged is None and self.problem is None and missing is None
        return SyncState("redis", in_sync, staleness, int(self.epoch or 0), self.diverged,
                         self.problem, {"hosts": len(self.copy), "copy_age_seconds": age},
                         missing)

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
                if current == epoch:  # writes lost within the epoch: a new one, so that
                    epoch = _epoch(pipe.time())  # every replica follows the copy put back
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
                self.failed(exc, "sanctions")
                raise BanlistUnavailable("sanctions",
                                         f"Redis unreachable, not reseeded: {exc}") from exc
        with self._lock:
            self.epoch, self.diverged, self.confirmed_at = epoch, None, self.clock()
            self._new_history()
        self.client.delete(self.lost_key)  # Redis holds this copy: nothing is missing now
        self._marked = False
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
            self.failed(exc, "sanctions")
            raise BanlistUnavailable("sanctions", f"Redis unreachable, not adopted: {exc}") from exc
        with self._lock:
            self.epoch, self.copy, self.read_at = epoch_r, got, self.clock()
            self.diverged, self.confirmed_at = None, self.clock()
            self._new_history()
        self._unmark()  # what only this copy held is let go
        log.warning("sanctions: adopted Redis's sanction states (epoch %s, %d hosts)",
                    epoch_r or "none", len(got))
        return {"epoch": int(epoch_r) if epoch_r else None, "hosts": len(got)}


def _epoch(time_reply: tuple[int, int]) -> str:
    """An epoch from Redis's clock, in ms, as the lists name theirs."""
    seconds, micros = time_reply
    return str(seconds * 1000 + micros // 1000)


def _pos(stream_id: str) -> tuple[int, int]:
    ms, _, n = stream_id.partition("-")
    return int(ms), int(n or 0)


_REFUSED = object()
