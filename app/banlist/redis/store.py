"""The Redis-backed banlist: Redis is the source of truth, this process holds a replica in memory.

Writes are Lua scripts (entry + INCR seq + XADD to the changelog, atomically, so sequence
order is stream order). A background thread tails the stream (`XREAD BLOCK`) and applies
each change when its seq is exactly last + 1 and its epoch is ours; anything else is a gap
and triggers a full resync, built aside and swapped in as one reference. A Redis whose
history went backwards (restarted empty, older seq, another epoch) or was rewritten after
going backwards (a fork: other changes under seqs the replica applied) is refused: the
replica keeps serving its copy and says so. Requests only ever read `index` and `version`.
"""
from __future__ import annotations

import functools
import gc
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson
import redis

from app.banlist import digest, history, snapshot
from app.banlist.base import (
    EntryEdit,
    EntrySpec,
    GroupSpec,
    StoreBase,
    SyncState,
    new_groups,
    plan,
    prepare,
    require_reason,
    validate_all,
)
from app.banlist.edits import editable, revise
from app.banlist.events import StoreEvents
from app.banlist.graveyard import Graveyard
from app.banlist.history import ChangeFilter
from app.banlist.index import BanIndex
from app.banlist.model import Entry, group_domains, group_name, iso, parse_iso
from app.banlist.redis import batch, lua, outcomes
from app.banlist.redis.client import REPLY_MARGIN, connect, reach
from app.banlist.redis.durable import Durability
from app.banlist.redis.ends import Ends, name_of
from app.banlist.redis.keys import Keys
from app.banlist.redis.policy import EvictionPolicy
from app.banlist.redis.recovery import Lost
from app.banlist.redis.replica import Replicator, change_of
from app.banlist.selection import Selection
from app.errors import (
    BanlistConflict,
    BanlistError,
    BanlistNotDurable,
    BanlistNotFound,
    BanlistTooLarge,
    BanlistUnavailable,
)

T = TypeVar("T")
log = logging.getLogger(__name__)
BATCH = 500  # expiries per sweep script: bounds how long one script holds Redis
MAX_SCRIPT = 10_000  # changes one write script may carry: one import request (≤ 10,000 lines)
DECIDE_TRIES = 8  # adds decided again after another replica added the same ban first
STAGE_TTL = 3600  # seconds a staged seed survives its writer dying halfway


class RedisStore(StoreBase):
    """A banlist replica that follows Redis; writes go to Redis first, then apply locally."""

    def __init__(self, url: str, events: StoreEvents, snapshot_path: Path | None, *,
                 prefix: str = "rearrange:", retention_seconds: float = 86400.0,
                 block_seconds: float = 1.0, snapshot_seconds: float = 300.0,
                 clock: Callable[[], float] = time.time, name: str = "banlist",
                 policy: EvictionPolicy | None = None,
                 durability: Durability | None = None,
                 history_seconds: float = 365 * 86400.0,
                 bootstrap_url: str | None = None, timeout_seconds: float = 5.0,
                 connect_timeout_seconds: float = 2.0) -> None:
        if block_seconds > 2 or block_seconds + REPLY_MARGIN > timeout_seconds:
            raise BanlistError("block_seconds", f"XREAD BLOCK must stay ≤ 2 s and {REPLY_MARGIN} "
                               f"s under the socket timeout ({timeout_seconds} s)")
        # Every command waits for its reply that long at most: a Redis behind a network
        # partition answers nothing and refuses nothing (docs/banlist.md's failure table)
        self.client = connect(url, socket_timeout=timeout_seconds,
                              socket_connect_timeout=connect_timeout_seconds)
        self.keys = Keys(prefix)
        self.events = events  # where it reports (the service's Metrics listen)
        self.clock = clock
        self.name = name  # "banlist", or "quarantine": in logs and metric labels
        self.policy = policy or EvictionPolicy(events)
        self.durability = durability or Durability(events)
        self.retention_ms = int(retention_seconds * 1000)
        self.history_ms = int(max(history_seconds, retention_seconds) * 1000)
        self._write = self.client.register_script(lua.WRITE)
        self._reseed = self.client.register_script(lua.RESEED)
        self._seed = self.client.register_script(lua.SEED)
        self.replica = Replicator(self.client, self.keys, self.policy, self.durability,
                                  events, name=name,
                                  clock=clock, block_seconds=block_seconds,
                                  snapshot_path=snapshot_path,
                                  snapshot_seconds=snapshot_seconds,
                                  bootstrap_url=bootstrap_url)
        self._index_lock = self.replica.lock
        self.replica.reapply = self._write_back  # what Redis lost, written again (recovery.py)
        self.graveyard = Graveyard()  # what lookup shows as `former`, read off the stream
        self._buried_to = "0-0"  # the stream record the graveyard has read up to
        self._whole = False  # the graveyard holds every end of the history stream
        self.ends = Ends(self.client, self.keys, self.history_ms, clock)  # and past it
        self.batches = batch.Batches(self.client, self.keys, self.retention_ms,
                                     self.history_ms)  # bulk removals
        self._bury_lock = threading.Lock()

    # ---- what the request path and the API read -------------------------------------------
    @property
    def index(self) -> BanIndex:
        return self.replica.index

    @index.setter
    def index(self, index: BanIndex) -> None:
        raise AttributeError("the Redis store's index is its replica's: only it swaps one in")

    def follow_index(self, served: Callable[[BanIndex], None]) -> None:
        self.replica.follow_index(served)

    @property
    def version(self) -> int:
        return self.replica.version

    def refresh(self) -> None:
        """Apply everything Redis has committed so far (a decision must not act on a lag)."""
        self.replica.catch_up()

    def sync_state(self) -> SyncState:
        return self.replica.state()

    def dump(self) -> tuple[snapshot.Snapshot, bytes]:
        return self.replica.dump()

    def start(self) -> None:
        """Load the local snapshot, try one sync with Redis, then follow it in the background."""
        try:  # a Redis written before the history stream: it starts from the changelog
            if copied := self.client.register_script(lua.HISTORY)(
                    keys=[self.keys.stream, self.keys.history]):
                log.warning("%s: Redis had no history stream; started it with the %d changes "
                            "of its changelog", self.name, copied)
        except redis.RedisError as exc:  # unreachable: the replica's start says so
            log.debug("history stream not checked: %s", exc)
        self.replica.start()

    def close(self) -> None:
        self.replica.stop()
        self.client.close()

    # ---- writes ---------------------------------------------------------------------------
    def put_import(self, groups: Sequence[GroupSpec], specs: list[EntrySpec], actor: str,
                   fresh: bool = False) -> tuple[list[str], list[tuple[Entry, bool]]]:
        """`put_many` with the org groups an import defines, in the same script before the
        entries (which may name them): consecutive seqs, or none. Returns the names of the
        groups it defined and the entries as put_many does.

        Which bans are new is decided on this replica's copy once caught up, and the script
        commits only if Redis's seq is still the one decided on; otherwise the decision is
        made again on the newer copy. A group held with the same members is a no-op, one
        held with other members a 409 before anything is written; one another replica
        defines after the decision makes the script refuse, and the decision is made again.
        `fresh` (a seed): refused, with field `seed`, when Redis already holds a banlist.
        """
        if len(specs) + len(groups) > MAX_SCRIPT:
            raise BanlistTooLarge("entries", f"{len(specs) + len(groups)} entries and groups in "
                                  f"one write; at most {MAX_SCRIPT} commit at once (send chunks)")
        now = self.clock()
        known = {**self.index.groups, **{g.name: g.domains for g in groups}}
        prepared = validate_all(specs, now, known) if len(specs) != 1 else [
            prepare(specs[0], now, known)]
        for _ in range(DECIDE_TRIES):
            self.replica.catch_up()
            with self.replica.lock:
                decided_on = self.replica.stream_id
                defined = new_groups(groups, self.index.groups)
                todo = plan(prepared, self.index, now)
            if not todo.fresh and not defined:
                self._confirm()  # a retry of a write that was not confirmed: confirm it now
                return [], todo.resolve([])
            args: list[Any] = []
            for g in defined:
                args += ["group", g.name, orjson.dumps(list(g.domains)).decode(), actor,
                         g.reason, ""]
            payloads = []
            for p in todo.fresh:
                payload = p.entry("", actor, now).as_dict()
                del payload["id"]
                payloads.append(payload)
                args += ["add", "", orjson.dumps(payload).decode(), actor, p.reason,
                         p.value if p.scope == "org" else ""]
            try:
                seqs = self._run(args, fresh, decided_on=decided_on)[len(defined):]
            except BanlistConflict as exc:
                if exc.field == "conflict":
                    continue
                raise
            # from the written form, so the caller sees exactly what every replica holds
            return [g.name for g in defined], todo.resolve(
                [Entry.from_dict({**payload, "id": str(seq)})
                 for payload, seq in zip(payloads, seqs, strict=True)])
        raise BanlistUnavailable("banlist", f"the banlist changed under this write {DECIDE_TRIES} "
                                 "times in a row; nothing was added: send it again")

    def remove(self, entry_id: str, actor: str, reason: str) -> Entry:
        """Lift an entry (an appeal): deleted in Redis and logged with actor and reason."""
        why = require_reason(reason, "a removal")
        entry = self.index.get(entry_id) or self._fetch(entry_id)  # this replica may lag
        if entry is None:
            raise BanlistNotFound("id", f"no active entry {entry_id!r}")
        self._run(["remove", entry_id, "", actor, why, ""],  # the script checks again
                  ends=[name_of(entry.scope, entry.value)])
        return entry

    def remove_matching(self, selection: Selection, actor: str, reason: str) -> int:
        """Lift every active entry `selection` takes as one bulk removal (batch.py); how
        many. Decided on this replica's copy once caught up: the ids are staged, and the
        batch opens only if Redis holds no change since that copy's last (else decided
        again), then commits chunk by chunk; every replica applies it as one batch."""
        why = require_reason(reason, "a removal")
        rep = self.replica
        deadline = time.monotonic() + batch.WAIT_SECONDS
        for _ in range(DECIDE_TRIES):
            rep.catch_up()
            if not rep.writable():
                raise BanlistUnavailable("banlist", rep.why_not_writable())
            with rep.lock:
                decided_on, epoch, index = rep.stream_id, rep.epoch, rep.index
            now = self.clock()
            count = selection.page(index, None, 0, now)[2]
            if not count:
                return 0
            try:
                reach(self.client)
                stage, staged = self.batches.stage(f"{e.id}\t{name_of(e.scope, e.value)}"
                                                   for e in selection.entries(index, now))
                with rep.lock:  # the copy it was taken from moved meanwhile: again
                    moved = rep.index is not index or rep.stream_id != decided_on
                if moved or staged != count:
                    self.client.delete(stage)
                    continue
                opened = self.batches.open(stage, count, epoch, decided_on, actor, why)
            except redis.ResponseError as exc:
                code = str(exc).partition(" ")[0]
                if code == "REARRANGE_CONFLICT":
                    continue
                if code == "REARRANGE_BUSY":
                    self._waiting(deadline)
                    continue
                raise _refusal(exc) from exc
            except redis.RedisError as exc:
                rep.failed(exc, "write")
                raise BanlistUnavailable("banlist", f"Redis unreachable, nothing was removed "
                                         f"(or, if the removal was opened, it is finished by "
                                         f"the next replica to reach Redis): {exc}") from exc
            self._commit(opened)
            return count
        raise BanlistUnavailable("banlist", f"the banlist changed under this removal "
                                 f"{DECIDE_TRIES} times in a row; nothing was removed: send it "
                                 "again")

    def _commit(self, opened: batch.Opened) -> None:
        """Commit an opened batch's chunks, then answer once this replica applied it and a
        Redis replica holds it."""
        try:
            self.batches.run(opened.id, opened.token)
        except BanlistConflict as exc:
            raise BanlistUnavailable("banlist", f"another replica took this bulk removal over "
                                     f"(this one was silent past its lease) and finishes it: "
                                     f"{exc.problem}") from exc
        except redis.RedisError as exc:
            self.replica.failed(exc, "write")
            raise BanlistUnavailable("banlist", (
                f"Redis went away in the middle of the bulk removal ({exc}): readers see all "
                f"of it or none, and once this replica's lease lapses "
                f"({batch.LEASE_MS // 1000} s) the next replica to reach Redis finishes it; "
                "GET /v1/banlist/changes lists its removals"), extra={"batch": opened.id}
            ) from exc
        self.replica.catch_up()  # read-your-writes: the whole batch applied here
        self._confirm()

    def _waiting(self, deadline: float) -> None:
        """Wait for a bulk removal under way (batch.Batches.wait); BanlistUnavailable when it
        is still under way at `deadline` or Redis cannot be reached."""
        try:
            self.batches.wait(deadline)
        except redis.RedisError as exc:
            self.replica.failed(exc, "write")
            raise BanlistUnavailable("banlist", f"Redis unreachable, the change was not made: "
                                     f"{exc}") from exc

    def edit(self, entry_id: str, edit: EntryEdit, actor: str) -> tuple[Entry, bool]:
        """Change an active entry's expiry or regions in place (edits.revise); the entry
        and whether it changed (an edit that changes nothing writes nothing).

        Decided on the entry as Redis holds it and on this replica's copy once caught up
        (for a ban the new regions would repeat); the script replaces the entry only if it
        is still what was decided on and no identical ban was committed since, otherwise
        the edit is decided again."""
        why = require_reason(edit.reason, "an edit")
        for attempt in range(DECIDE_TRIES):
            if attempt:  # another writer edits the same entry: let one of the two go first
                time.sleep(random.uniform(0, min(0.2, 0.005 * 2 ** attempt)))
            self.replica.catch_up()
            held = self._payload(entry_id)  # this replica may lag: Redis's own
            now = self.clock()
            entry = editable(None if held is None else Entry.from_dict(
                {"id": entry_id, **orjson.loads(held)}), entry_id, edit, now)
            with self.replica.lock:
                decided_on = self.replica.stream_id
                after = revise(entry, edit, self.index, now)
            if after is None:
                self._confirm()  # a retry of an edit that was not confirmed: confirm it now
                return entry, False
            payload = after.as_dict()
            del payload["id"]
            written = orjson.dumps(payload).decode()
            try:
                self._run(["edit", entry_id, written, actor, why, held], decided_on=decided_on)
            except BanlistConflict as exc:
                if exc.field == "conflict":
                    continue
                raise
            # from the written form, so the caller sees exactly what every replica holds
            return Entry.from_dict({"id": entry_id, **orjson.loads(written)}), True
        raise BanlistUnavailable("banlist", f"entry {entry_id} changed under this edit "
                                 f"{DECIDE_TRIES} times in a row; nothing was changed: send "
                                 "it again")

    def _fetch(self, entry_id: str) -> Entry | None:
        payload = self._payload(entry_id)
        return None if payload is None else Entry.from_dict({"id": entry_id,
                                                              **orjson.loads(payload)})

    def _payload(self, entry_id: str) -> str | None:
        """The entry as Redis holds it now (its JSON without the id), None if it has none."""
        try:
            return self.client.hget(self.keys.entries, entry_id)
        except redis.RedisError as exc:
            self.replica.failed(exc, "write")
            raise BanlistUnavailable("banlist", f"Redis unreachable, the change was not made: "
                                     f"{exc}") from exc

    def _write_back(self, lost: Lost) -> int:
        """Write again what Redis lost and this replica holds (recovery.py): groups first
        (entries may name them), then the adds (idempotent: a replica that wrote them back
        first leaves nothing to do), the removals and edits of entries Redis still holds.

        Returns how many of its writes no Redis replica confirmed yet: they are on the
        primary, which is what the replicas that follow Redis need (right after a failover
        the new primary's replica is often the old primary, still down); were the primary
        lost again first, this replica would find them lost again and write them again."""
        writes: list[Callable[[], object]] = []
        for name, domains, actor, why in lost.groups:
            if self.index.groups.get(name) != domains:
                writes.append(functools.partial(self.define_group, name, list(domains), actor,
                                                why))
        specs = [EntrySpec(e.scope, e.value, e.reason, tuple(sorted(e.regions)), e.expires_at,
                           actor=e.actor) for e in lost.adds]
        for start in range(0, len(specs), MAX_SCRIPT):
            writes.append(functools.partial(self.put_import, (), specs[start:start + MAX_SCRIPT],
                                            "recovery"))
        writes += [functools.partial(self.remove, entry_id, actor, why)
                   for entry_id, actor, why in lost.removes]
        writes += [functools.partial(self.edit, entry.id, EntryEdit(
            why, True, entry.expires_at, tuple(sorted(entry.regions))), actor)
            for entry, actor, why in lost.edits]
        unconfirmed = 0
        for write in writes:
            try:
                write()
            except BanlistNotFound:
                continue  # another replica removed it first
            except BanlistNotDurable:
                unconfirmed += 1
        return unconfirmed

    def define_group(self, name: str, domains: list[str], actor: str,
                     reason: str) -> dict[str, Any]:
        """Define or redefine an org group (a named set of domains banned together)."""
        key, members = group_name(name), group_domains(domains)
        why = require_reason(reason, "a group definition")
        seq = self._run(["group", key, orjson.dumps(list(members)).decode(), actor, why, ""])[0]
        return {"seq": seq, "op": "group", "name": key, "domains": list(members),
                "actor": actor, "reason": why, "at": iso(self.clock())}

    def sweep(self) -> int:
        """Record the expiry of entries past their TTL (they already stopped matching); and
        first, finish a bulk removal whose writer died (batch.py). None while a bulk removal
        is under way: they wait for the next sweep."""
        now = self.clock()
        if not self.replica.writable():
            return 0
        try:
            self.batches.finish_abandoned()
            if self.batches.under_way() is not None:
                return 0
        except (redis.RedisError, BanlistError) as exc:
            log.warning("banlist sweep skipped: a bulk removal could not be finished: %s", exc)
            return 0
        with self.replica.lock:
            expired = [e.as_dict() for e in self.replica.index.expired(now)]
        done = 0
        for start in range(0, len(expired), BATCH):
            args: list[Any] = []
            batch = expired[start:start + BATCH]
            for e in batch:  # the expiry seen: an edit since keeps it
                args += ["expire", e["id"], "", "system", "ttl elapsed", e["expires_at"]]
            try:
                done += sum(1 for seq in self._run(args, ends=[
                    name_of(e["scope"], e["value"]) for e in batch]) if seq)
            except BanlistError as exc:
                log.warning("banlist sweep stopped: %s", exc.problem)
                break
        return done

    def seed(self, specs: Iterable[EntrySpec], actor: str = "seed",
             groups: Sequence[GroupSpec] = ()) -> int:
        """Import entries (and the org groups they name) when Redis holds no banlist yet
        (first start of the first replica); returns how many entries were added.

        All or nothing either way: up to MAX_SCRIPT entries as one write script (each add in
        the history); more are staged in a hash of their own, then swapped in by one script
        that logs a single `seed` change (replicas resync). A seeder that dies halfway leaves
        Redis empty (the staging hash expires), so the next start seeds again.
        """
        items = list(specs)
        if not (items or groups) or self.version or self.replica.epoch or not self.replica.loaded:
            return 0
        try:
            if self.client.exists(self.keys.epoch):
                return 0
        except redis.RedisError as exc:
            raise BanlistUnavailable("banlist", f"Redis unreachable, not seeded: {exc}") from exc
        try:
            added = (sum(1 for _, existing in self.put_import(groups, items, actor, fresh=True)[1]
                         if not existing) if len(items) + len(groups) <= MAX_SCRIPT
                     else self._seed_staged(items, actor, groups))
        except BanlistConflict as exc:
            if exc.field != "seed":
                raise
            return 0  # another replica's first start seeded Redis between our check and now
        gc.freeze()
        return added

    def _seed_staged(self, items: list[EntrySpec], actor: str,
                     groups: Sequence[GroupSpec]) -> int:
        now = self.clock()
        members = {g.name: g.domains for g in groups}
        # a seed file naming one ban twice seeds it once
        prepared = plan(validate_all(items, now, members), BanIndex(), now).fresh
        stage, stage_groups = self.keys.seed_stage(), self.keys.seed_stage()
        content = digest.Digest.of((), members)
        try:
            for start in range(0, len(prepared), 5000):
                mapping = {}
                for n, p in enumerate(prepared[start:start + 5000], start + 1):
                    stored = digest.payload(p.entry(str(n), actor, now))
                    content.toggle(digest.entry_hash(str(n), stored))
                    mapping[str(n)] = stored.decode()
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(stage, mapping=mapping)
                pipe.expire(stage, STAGE_TTL)
                pipe.execute()
            if members:
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(stage_groups, mapping={k: orjson.dumps(list(v)).decode()
                                                 for k, v in members.items()})
                pipe.expire(stage_groups, STAGE_TTL)
                pipe.execute()
            self._seed(keys=[*self.keys.write(), stage, stage_groups, self.keys.digest,
                             self.keys.history],
                       args=[len(prepared), actor, "seed", content.hex])
        except redis.ResponseError as exc:
            self.client.delete(stage, stage_groups)
            if str(exc).startswith("REARRANGE_NOTEMPTY"):
                return 0  # another replica seeded first
            raise _refusal(exc) from exc
        except redis.RedisError as exc:
            self.replica.failed(exc, "write")
            raise BanlistUnavailable("banlist", f"Redis unreachable while seeding: {exc} (all or "
                                     "nothing: a start that finds Redis still empty seeds "
                                     "again)") from exc
        self.replica.resync("seed")
        self._confirm()
        return len(prepared)

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]:
        """Write this replica's copy back into Redis (after Redis lost or rewound it)."""
        why = require_reason(reason, "a reseed")
        rep = self.replica
        if not rep.loaded or not rep.epoch:
            raise BanlistConflict("banlist", "this replica holds no banlist to reseed from")
        try:
            cur_epoch, cur_seq = self.client.mget(self.keys.epoch, self.keys.seq)
            cur_epoch, cur_seq = cur_epoch or "", cur_seq or "0"
            same = cur_epoch == str(rep.epoch)
            if (same and int(cur_seq) >= rep.version and rep.diverged is None
                    and rep.forked is None):
                raise BanlistConflict("banlist", f"Redis is not behind this replica (Redis seq "
                                      f"{cur_seq}, replica {rep.version}): nothing to reseed")
            if cur_epoch and not same and not force:
                raise BanlistConflict("force", f"Redis holds another history (epoch {cur_epoch}, "
                                      f"replica {rep.epoch}); pass force to overwrite it")
            if same and not force and self.client.xrange(
                    self.keys.stream, min=f"({rep.stream_id}", count=1):
                raise BanlistConflict("force", f"Redis holds changes this replica has not applied "
                                      f"(Redis seq {cur_seq}, replica {rep.version}: written after "
                                      f"a rewind?); pass force to overwrite them")
            with rep.lock:
                entries, groups = list(rep.index), dict(rep.index.groups)
                epoch, seq, base = rep.epoch, rep.version, rep.stream_id
            content = digest.Digest.of((), groups)
            self.client.delete(self.keys.stage_entries, self.keys.stage_groups)
            for start in range(0, len(entries), 5000):
                mapping = {}
                for e in entries[start:start + 5000]:
                    stored = digest.payload(e)
                    content.toggle(digest.entry_hash(e.id, stored))
                    mapping[e.id] = stored.decode()
                self.client.hset(self.keys.stage_entries, mapping=mapping)
            if groups:
                self.client.hset(self.keys.stage_groups, mapping={
                    k: orjson.dumps(list(v)).decode() for k, v in groups.items()})
            new_seq = self._reseed(keys=[*self.keys.write(), self.keys.stage_entries,
                                         self.keys.stage_groups, self.keys.digest,
                                         self.keys.history, self.keys.batch,
                                         self.keys.batch_list, self.keys.batch_lease],
                                   args=[epoch, seq, cur_epoch, cur_seq, actor, why, base,
                                         content.hex])
        except redis.ResponseError as exc:
            raise _refusal(exc) from exc
        except redis.RedisError as exc:
            self.events.redis_error("reseed")
            raise BanlistUnavailable("banlist", f"Redis unreachable, not reseeded: {exc}") from exc
        rep.dropped_marks(everyone=True)  # Redis holds this copy: nothing is missing now
        self._confirm()
        return {"entries": len(entries), "groups": len(groups), "epoch": epoch,
                "seq": int(new_seq), "replaced": {"epoch": cur_epoch or None,
                                                  "seq": int(cur_seq)}}

    def adopt(self) -> dict[str, Any]:
        """Accept what Redis holds now, even if older than this replica's copy (operator call)."""
        self.replica.resync("adopt", accept_backward=True)
        self.replica.dropped_marks(everyone=False)  # what only this copy held is let go
        return {"epoch": self.replica.epoch, "seq": self.version, "entries": len(self)}

    def forget_loss(self, replica: str) -> dict[str, Any]:
        """Drop the loss mark of a replica gone for good (Replicator.forget_loss)."""
        try:
            return self.replica.forget_loss(replica)
        except redis.RedisError as exc:
            self.replica.failed(exc, "write")
            raise BanlistUnavailable("banlist", f"Redis unreachable, nothing forgotten: "
                                     f"{exc}") from exc

    def changes_since(self, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
        """The changelog after `seq` (within the stream's retention window)."""
        try:
            start = self._stream_start_after(seq)
            out: list[dict[str, Any]] = []
            while start is not None and len(out) < limit:
                page = self.client.xrange(self.keys.stream, min=start, max="+",
                                          count=limit + 64)
                for sid, fields in page:
                    at = int(fields["seq"])
                    if out and at <= out[-1]["seq"] and sid not in self.replica.replays:
                        raise BanlistUnavailable("banlist", f"Redis's changelog holds seq {at} "
                                                 f"twice (again at stream id {sid}): its history "
                                                 "was rewritten, and none is served until a "
                                                 "reseed rewrites it")
                    if at > seq and len(out) < limit and sid not in self.replica.replays:
                        out.append(change_of(sid, fields))
                start = f"({page[-1][0]}" if len(page) == limit + 64 else None
            return out
        except redis.RedisError as exc:
            self.events.redis_error("history")
            raise BanlistUnavailable("banlist", f"Redis unreachable, no history: {exc}") from exc

    def history(self, flt: ChangeFilter, since: int = 0, limit: int = 1000,
                before: int | None = None, newest: bool = False) -> list[dict[str, Any]]:
        """Up to `limit` changes with `since` < seq < `before` that `flt` keeps (within the
        stream's retention window): the first, or with `newest` the last (history.select);
        BanlistUnavailable while Redis is unreachable."""
        return self._reading(lambda: history.select(self._records(flt), flt,
                                                    self.index.groups, since, limit,
                                                    before, newest))

    def former(self, canonical: str, host: str) -> list[dict[str, Any]]:
        """Entries that matched this canonical URL once and are gone (Graveyard.former): the
        last FORMER_MAX ended, read off the history stream from where the last lookup
        stopped; when more ended within the history's window, the older ones from the
        index of ends (ends.py), at most ends.LIMIT of them."""
        self._reading(self._bury_new)
        found = self.graveyard.former(canonical, host, self.index)
        if self._whole:
            return found
        with self.graveyard.lock:  # the oldest end it holds: it holds every newer one
            oldest = next(iter(self.graveyard.ends.values()), None)
        return found + self._reading(lambda: self.ends.former(
            canonical, host, self.index, None if oldest is None else parse_iso(oldest.at),
            self.graveyard.ends, self._readable))

    def history_since(self) -> str | None:
        """When the oldest change `former` knows of was made (None: the history held none):
        the history's start while the graveyard holds all of it, else as far back as the
        index of ends reaches (the history window's start, or its first end if later)."""
        since = self.graveyard.since
        if self._whole:
            return since
        reach = self._reading(self.ends.since)
        return since if reach is None else min(reach, since or reach)

    def _bury_new(self) -> None:
        """Bury the entries the history's records since the last call ended (a remove or an
        expire carries its entry; one written before it did, the add of this read). The
        first call reads back from the newest record until the graveyard is full: a year of
        history need not be read through to fill it."""
        with self._bury_lock:
            if self._buried_to == "0-0":
                self._bury_recent()
            start = f"({self._buried_to}"
            added: dict[str, dict[str, Any]] = {}
            while True:
                page = self.client.xrange(self.keys.history, min=start, max="+", count=5000)
                gone = []
                for sid, fields in page:
                    if (change := self._readable(sid, fields)) is None:
                        continue
                    if self.graveyard.since is None:
                        self.graveyard.since = change["at"]
                    if change["op"] in ("add", "edit"):
                        added[change["entry"]["id"]] = change["entry"]
                    elif change["op"] in history.ENDS:
                        entry = change.get("entry") or added.get(change["id"])
                        if entry is not None:
                            gone.append((Entry.from_dict(entry), change))
                held = len(self.graveyard)
                self.graveyard.bury(gone)
                self._whole &= len(self.graveyard) == held + len(gone)  # none dropped
                if page:
                    self._buried_to = page[-1][0]
                if len(page) < 5000:
                    return
                start = f"({page[-1][0]}"

    def _readable(self, sid: str, fields: dict[str, str]) -> dict[str, Any] | None:
        """A history record as a change; None (logged, counted: read past it, once) when no
        writer of ours could have written it."""
        try:
            return change_of(sid, fields)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("banlist: history record %s unreadable, left out of the former entries: "
                      "%r", sid, exc)
            self.events.redis_error("history")
            return None

    def _bury_recent(self) -> None:
        """The newest ends of the history, newest first, until the graveyard holds as many
        as it keeps or the history's start is reached; `_buried_to` is then the newest
        record, and `since` when the oldest change read was made."""
        gone: list[tuple[Entry, dict[str, Any]]] = []
        bare: dict[str, dict[str, Any]] = {}  # ends that name only an id: their add is older
        end, oldest, whole = "+", None, False
        while len(gone) < self.graveyard.cap:
            page = self.client.xrevrange(self.keys.history, max=end, min="-", count=5000)
            for sid, fields in page:
                if self._buried_to == "0-0":
                    self._buried_to = sid
                if (change := self._readable(sid, fields)) is None:
                    continue
                oldest = change["at"]
                if change["op"] in history.ENDS:
                    if change.get("entry"):
                        gone.append((Entry.from_dict(change["entry"]), change))
                    else:
                        bare[change["id"]] = change
                elif change["op"] == "add" and change["entry"]["id"] in bare:
                    gone.append((Entry.from_dict(change["entry"]),
                                 bare.pop(change["entry"]["id"])))
            if len(page) < 5000:
                whole = len(gone) <= self.graveyard.cap  # read back to the start, all kept
                break
            end = f"({page[-1][0]}"
        self._whole = whole
        if self._buried_to == "0-0":
            self._buried_to = "0-1"  # an empty history: read forward from its start next time
        self.graveyard.since = oldest
        gone.sort(key=lambda g: g[1]["seq"])
        self.graveyard.bury(gone[-self.graveyard.cap:])

    def _records(self, flt: ChangeFilter) -> Iterator[dict[str, Any]]:
        """The stream's changes in the filter's time range (stream ids are times), in order."""
        low = str(int(parse_iso(flt.start) * 1000)) if flt.start else "-"
        high = str(int(parse_iso(flt.until) * 1000)) if flt.until else "+"  # the ms itself:
        # the filter drops what is at or past `until`
        while True:
            page = self.client.xrange(self.keys.history, min=low, max=high, count=5000)
            for sid, fields in page:
                yield change_of(sid, fields)
            if len(page) < 5000:
                return
            low = f"({page[-1][0]}"

    def _reading(self, read: Callable[[], T]) -> T:
        try:
            return read()
        except redis.RedisError as exc:
            self.replica.failed(exc, "history")  # counted; logged when Redis is first lost
            raise BanlistUnavailable("banlist", f"Redis unreachable, no history: {exc}") from exc

    def _stream_start_after(self, seq: int) -> str | None:
        """Binary search over stream time for the first record with a seq above `seq`."""
        first = self.client.xrange(self.keys.stream, count=1)
        last = self.client.xrevrange(self.keys.stream, count=1)
        if not first or int(last[0][1]["seq"]) <= seq:
            return None
        if int(first[0][1]["seq"]) > seq:
            return "-"
        lo, hi = int(first[0][0].split("-")[0]), int(last[0][0].split("-")[0])
        while lo < hi:  # smallest ms whose first record has seq > `seq`
            mid = (lo + hi) // 2
            probe = self.client.xrange(self.keys.stream, min=str(mid + 1), count=1)
            if probe and int(probe[0][1]["seq"]) <= seq:
                lo = mid + 1
            else:
                hi = mid
        return str(lo)

    def write_state(self, write_id: str) -> dict[str, Any]:
        """Whether a write committed; one not found is fenced off first, so a `false` is final
        (answerable within the changelog's retention, which is how long outcomes are kept)."""
        try:
            return outcomes.state(self.client, self.keys.outcome(write_id), write_id,
                                  self.retention_ms)
        except redis.RedisError as exc:
            self.replica.failed(exc, "write")
            raise BanlistUnavailable("banlist",
                                     f"Redis unreachable, cannot tell yet: {exc}") from exc

    def _run(self, args: list[Any], fresh: bool = False, decided_on: str | None = None,
             ends: Sequence[str] = ()) -> list[int]:
        """Run the write script over `args` (six per change, lua.WRITE); `ends` names the
        index set (ends.name_of) of each remove or expire among them, in their order."""
        rep = self.replica
        if not rep.writable():
            raise BanlistUnavailable("banlist", rep.why_not_writable())
        expected = "!fresh" if fresh else str(rep.epoch) if rep.epoch else ""
        write_id, attempt = uuid.uuid4().hex, uuid.uuid4().hex
        try:
            reach(self.client)
        except redis.RedisError as exc:
            # nothing was sent: no outcome to settle, the change was not made
            rep.failed(exc, "write")
            raise BanlistUnavailable(
                "banlist", f"Redis unreachable, the change was not made: {exc}") from exc
        indexed = [self.keys.ends_since, *map(self.keys.ends, ends)] if ends else []
        deadline = time.monotonic() + batch.WAIT_SECONDS
        try:
            while True:
                try:
                    result = self._write(keys=[*self.keys.write(), self.keys.outcome(write_id),
                                               self.keys.digest, self.keys.history,
                                               self.keys.batch, *indexed],
                                         args=[expected, self.retention_ms,
                                               max(1, self.retention_ms // 1000), attempt,
                                               decided_on or "", self.history_ms, *args])
                    break
                except redis.ResponseError as exc:
                    if not str(exc).startswith("REARRANGE_BUSY"):
                        raise
                    self._waiting(deadline)  # refused before it wrote: sent again after
        except redis.ResponseError as exc:
            raise _refusal(exc) from exc
        except redis.RedisError as exc:
            rep.failed(exc, "write")
            result = outcomes.settle(self.client, self.keys.outcome(write_id), write_id,
                                     attempt, self.retention_ms, exc)
        rep.catch_up()  # read-your-writes: apply up to our own change before answering
        self._confirm()
        return [int(s) for s in result[1:]]

    def _confirm(self) -> None:
        """Answer only once a Redis replica holds what was written (durable.py): else 503
        not_durable (BanlistNotDurable)."""
        try:
            self.durability.confirm(self.client, self.keys.durable, self.name)
        except BanlistError:
            self.events.redis_error("write")
            raise


def _refusal(exc: redis.ResponseError) -> BanlistError:
    code, _, text = str(exc).partition(" ")
    if code == "REARRANGE_NOTFOUND":
        return BanlistNotFound("id", text)
    if code == "REARRANGE_CONFLICT":
        return BanlistConflict("conflict", text)
    if code == "REARRANGE_SEEDED":
        return BanlistConflict("seed", text)
    if code == "REARRANGE_NOGROUP":
        return BanlistError("value", text + ": define it first")
    if code == "NOREPLICAS":  # min-replicas-to-write: the primary refused it, nothing written
        return BanlistNotDurable("banlist", f"Redis refused the write: {text} (its "
                                 "min-replicas-to-write); nothing was changed: send it again "
                                 "once its replicas are back")
    if code in ("REARRANGE_EMPTY", "REARRANGE_EPOCH", "REARRANGE_MOVED", "REARRANGE_STAGE",
                "REARRANGE_ABORTED", "REARRANGE_BUSY", "REARRANGE_NOBATCH",
                "REARRANGE_LEASE"):
        kind = BanlistConflict if code == "REARRANGE_MOVED" else BanlistUnavailable
        return kind("banlist", text)
    return BanlistUnavailable("banlist", f"Redis refused the script: {exc}")
