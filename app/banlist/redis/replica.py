"""Following Redis: tail the changelog, detect gaps, rewinds and forks, resync aside, keep a copy.

A fork: Redis lost changes this replica applied (a restart without AOF, a failover to a
lagging Redis replica, an `adopt` elsewhere) and new changes took their seqs. Two checks find
it, both against `stream_id`, the stream record this replica applied last:

- every round asks for the record at or before `stream_id` along with `epoch` and `seq`:
  one older than it, with ours gone, means Redis no longer holds our last change (trimming
  removes the oldest records first, so it cannot leave older ones and take ours);
- a record after `stream_id` whose seq this replica already applied was written over a
  rewind. (A record at or before `stream_id` is one a writer's catch-up applied while this
  thread's XREAD was under way: skipped.)

When trimming took our record and everything before it, the stream cannot tell a history
that moved on from one rewritten more than the retention ago. A replica that follows Redis
then resyncs on the gap, as it always did; a replica that already refused Redis stays
refused: only proof that Redis holds its history (our record, followed by the next seq, or
an operator's reseed after it) lifts a refusal.

Redis can also rewrite the changelog itself (an AOF replay putting back refused writes): each
round counts it too (forks.py), and a seq held twice with different changes is refused on
every replica, one that resynced past it included; the same change twice is a replay, skipped.
The same replica class follows the quarantine list (`name`), under its own keys.
"""
from __future__ import annotations

import gc
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import redis

from app.banlist import digest, snapshot
from app.banlist.base import FollowedIndex, IndexChange, SyncState, index_change
from app.banlist.edits import edit_change
from app.banlist.events import StoreEvents
from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso
from app.banlist.redis import bootstrap, forks, recovery, txn
from app.banlist.redis.client import TextRedis
from app.banlist.redis.durable import Durability
from app.banlist.redis.follower import Follower
from app.banlist.redis.keys import Keys
from app.banlist.redis.policy import EvictionPolicy
from app.errors import BanlistConflict, BanlistError, BanlistNotFound

log = logging.getLogger(__name__)
PAGE = 5000
DIGEST_RETRY = 600.0  # seconds between resyncs over a digest a resync did not mend


def change_of(stream_id: str, f: dict[str, str]) -> dict[str, Any]:
    """A stream record in the shape of `GET /v1/banlist/changes` (the embedded log's shape)."""
    change = _what(f)
    change.update(actor=f["actor"], reason=f["reason"],
                  at=iso(int(stream_id.partition("-")[0]) / 1000))
    return change


def _what(f: dict[str, str]) -> dict[str, Any]:
    """What a stream record changed: change_of's fields but who, why and when."""
    seq, op, key = int(f["seq"]), f["op"], f["key"]
    change: dict[str, Any] = {"seq": seq, "op": op}
    if op == "add":
        change["entry"] = {"id": key, **orjson.loads(f["payload"])}
    elif op == "group":
        change.update(name=key, domains=orjson.loads(f["payload"]))
    elif op == "seed":
        change["entries"] = int(key)
    elif op == "edit":  # the entry as it is now, and as it was
        change.update(edit_change({"id": key, **orjson.loads(f["previous"])},
                                  {"id": key, **orjson.loads(f["payload"])}))
    elif op != "reseed":
        change["id"] = key
        if f.get("payload"):  # the entry a remove or expire deleted (none before it said)
            change["entry"] = {"id": key, **orjson.loads(f["payload"])}
    return change


def _continues(epoch_r: str | None, seq_r: str | None, mine: list[Any],
               known: tuple[int, int, str]) -> bool:
    """Whether Redis's history continues a copy at `known` (epoch, seq, stream id) that this
    replica did not make (a bootstrap snapshot): the same epoch, Redis at or past its seq,
    and its last record still there unless trimmed (a gap then resyncs, as ever)."""
    epoch, version, sid = known
    if epoch_r is None or int(epoch_r) != epoch or int(seq_r or 0) < version:
        return False
    return not mine or sid == "0-0" or mine[0][0] == sid


def _stream_pos(stream_id: str) -> tuple[int, int]:
    ms, _, n = stream_id.partition("-")
    return int(ms), int(n or 0)


def _forked(epoch: int, version: int) -> str:
    return (f"Redis's history was rewritten after a rewind: its changelog no longer continues "
            f"this replica's copy at seq {version} (epoch {epoch}); the two hold different "
            f"changes under the same seqs")


def _change(f: dict[str, str]) -> IndexChange | None:
    """A stream record as a change for `BanIndex.apply` (None: nothing to apply).

    "reseed" and "seed" never reach here: the replica answers them itself (a no-op or a
    resync; a seed starts an epoch). A remove or expire is applied by its id alone, an
    edit as an add of the same id (the index replaces the entry it held)."""
    if f["op"] in ("remove", "expire"):
        return ("remove", f["key"])
    return index_change(_what(f))


def record_hash(f: dict[str, str], changes: digest.Changes) -> int:
    """What one stream record does to the digest of the copy it applies to, hashed from
    the record's own payloads (the bytes the write script hashed)."""
    op, key = f["op"], f["key"]
    if op in ("add", "edit"):
        return changes.entry(key, digest.entry_hash(key, f["payload"]), f.get("previous"))
    if op in ("remove", "expire"):  # a record written before removals carried the entry
        return changes.entry(key, 0, f.get("payload") or None)  # has none: re-serialized
    if op == "group":
        return changes.group(key, orjson.loads(f["payload"]))
    return 0


class Replicator(Follower, FollowedIndex):
    """This process's copy of the banlist and the thread that keeps it equal to Redis's."""

    def __init__(self, client: TextRedis, keys: Keys, policy: EvictionPolicy,
                 durability: Durability, events: StoreEvents, *, name: str,
                 clock: Callable[[], float], block_seconds: float, snapshot_path: Path | None,
                 snapshot_seconds: float, bootstrap_url: str | None = None) -> None:
        super().__init__(client, name, block_seconds, events.redis_error, durability)
        self.keys, self.policy, self.events = keys, policy, events
        self.durability: Durability = durability
        self.clock = clock
        self.snapshot_path = snapshot_path
        self.bootstrap_url = bootstrap_url  # REARRANGE_BANLIST_BOOTSTRAP_URL (bootstrap.py)
        # a bootstrap snapshot not yet seen continuing Redis's history: a head start only
        self.provisional = False
        self.snapshot_seconds = snapshot_seconds
        self.lock = threading.RLock()  # applying changes, swapping the index, copying it
        self._index_lock = self.lock
        self.index = BanIndex()
        self.digest = 0  # of the index's content (digest.py), published with each batch
        self.version = 0
        self.epoch = 0
        self.stream_id = "0-0"
        self._reading: txn.Reading | None = None  # a bulk removal's records held (txn.py)
        self.loaded = False  # holds a copy (from Redis or from the local snapshot)
        self.synced_at = 0.0  # wall time this copy was last confirmed equal to Redis's
        self.diverged: str | None = None
        self.forked: str | None = None  # why Redis's changelog is not one history (forks.py)
        self._resync_cause: str | None = None
        self._excess: int | None = 0  # forks.excess when the changelog was last read through
        self.replays: frozenset[str] = frozenset()  # records repeating one exactly: skipped
        # Changes Redis lost (recovery.py): the records applied last, this process's name in
        # the loss marks, the marks Redis holds, and the writes that put a loss back
        self.journal = recovery.Journal()
        self.me = f"{recovery.replica_name()}/{name}/{uuid.uuid4().hex[:6]}"
        self.marks: dict[str, str] = {}
        self.mark_watch = recovery.MarkWatch()  # which marks their holders still refresh
        self.pending: recovery.Lost | None = None  # taken Redis's copy, not written back yet
        self.reapply: Callable[[recovery.Lost], int] | None = None  # the store's writes
        self._marked = False  # this refusal is marked in Redis
        self.differs: str | None = None  # why this copy's digest is not Redis's
        self._mended_at: float | None = None  # when a resync last tried to mend that
        self._digest_tried_at: float | None = None  # when Redis's digest was last computed
        self._snap_seq = -1
        self._snap_at = 0.0

    # ---- life cycle -----------------------------------------------------------------------
    def start(self) -> None:
        """The local snapshot file, else the bootstrap URL's snapshot, then Redis: one round
        now (from the snapshot's last record: the changes since), then the thread."""
        snap = snapshot.read(self.snapshot_path) if self.snapshot_path else None
        if snap is not None:
            log.info("%s: loaded local snapshot seq %d epoch %d (%d entries)",
                     self.name, snap.seq, snap.epoch, len(snap.index))
        elif self.bootstrap_url:
            snap = bootstrap.fetch(self.bootstrap_url, self.name, self.events)
            self.provisional = snap is not None
        if snap is not None:
            self._install(snap.index, snap.seq, snap.epoch, snap.stream_id, snap.digest)
            self.synced_at, self._snap_seq = snap.synced_at, snap.seq
        self.follow()

    def stop(self) -> None:
        self.halt()
        self._write_snapshot(force=True)

    def after_round(self) -> None:
        self._write_snapshot()

    # ---- one round: check where Redis is, read what is new --------------------------------
    def round(self, block: bool) -> None:
        checked = self.clock()
        with self.lock:  # a writer may apply more meanwhile: the copy as of now, with its digest
            known = (self.epoch, self.version, self.stream_id)
            content = self.digest
        pipe = self.client.pipeline(transaction=True)  # one moment: the count must add up
        pipe.execute_command("ROLE")
        pipe.mget(self.keys.epoch, self.keys.seq, self.keys.digest)
        pipe.xrevrange(self.keys.stream, max=known[2], min="-", count=1)
        pipe.xlen(self.keys.stream)
        pipe.xrange(self.keys.stream, count=1)
        pipe.xrevrange(self.keys.stream, count=1)
        pipe.hgetall(self.keys.lost)
        pipe.exists(self.keys.batch)
        (role, (epoch_r, seq_r, digest_r), mine, length, first, last, marks,
         batch_open) = pipe.execute()
        self.primary(role)  # a demoted primary's copy is no source to follow
        self.policy.watch(self.client, reconnected=not self.connected)
        self.durability.watch(self.client, reconnected=not self.connected)
        self._check_changelog(forks.excess(length, first, last))
        self.marks = marks
        self.mark_watch.saw(marks)
        if self.provisional:  # a bootstrap snapshot: followed only if Redis continues it
            if not _continues(epoch_r, seq_r, mine, known):
                log.warning("%s: the bootstrap snapshot (seq %d epoch %d) does not continue "
                            "Redis's history (epoch %s seq %s); loading Redis's copy instead",
                            self.name, known[1], known[0], epoch_r, seq_r)
                self.provisional = False
                self.resync("bootstrap", accept_backward=True)
                return
            self.provisional = False
        refused = not self._accept(epoch_r, seq_r, mine, known)
        if refused and self.diverged and not self.forked and self._recover(epoch_r):
            return  # Redis's copy taken: the lost changes are written on the next round
        if self.pending is not None and not refused:
            self._reapply()
        elif self._marked and self.pending is None and self.diverged is None:
            self._unmark()  # a mark whose removal failed once: nothing is missing any more
        if refused or (self.forked and self.epoch):  # keep the copy held, apply nothing
            self.reached()  # reachable, but refused
            if block:
                self.wait(self.block_ms / 1000)
            return
        self._compare(epoch_r, seq_r, digest_r, known, content)
        if epoch_r is None:  # Redis and this replica both hold nothing yet
            self.loaded = True
            self._confirmed(checked)
            if self._resync_cause:  # a stream without an epoch: nothing sane to follow
                if block:
                    self.wait(self.block_ms / 1000)
                return
            # else block on the stream itself: the very first change arrives at once
        elif self._resync_cause or not self.epoch:
            if batch_open:  # a copy read now would hold half a bulk removal: after it
                self._resync_cause = self._resync_cause or "start"
                if block:
                    self.wait(self.block_ms / 1000)
                return
            self.resync(self._resync_cause or "start")
            return
        got = self.client.xread({self.keys.stream: self._read_from()}, count=PAGE,
                                block=self.block_ms if block else None)
        records = got[0][1] if got else []
        with self.lock:
            self._apply_records(records, observe=True)
            self._settle(bool(batch_open), seq_r)
            # a bulk removal held is no lag: the copy served is the last whole one
            read_to = self.version if self._reading is None else self._reading.version
        if self._resync_cause is None and not self.diverged and read_to >= int(seq_r or 0):
            self._confirmed(self.clock() if block and not records else checked)

    def _compare(self, epoch_r: str | None, seq_r: str | None, digest_r: str | None,
                 known: tuple[int, int, str], content: int) -> None:
        """Redis's content digest against this copy's, when both are at the same seq (read in
        one moment: most rounds). A difference resyncs; one a resync does not mend (Redis's
        digest, or this copy, wrong in a way a reload does not fix) makes this replica not
        ready until they agree, and it resyncs again at most every DIGEST_RETRY seconds."""
        if epoch_r is None or int(epoch_r) != known[0] or int(seq_r or 0) != known[1]:
            return  # another point of the history: compared on a later round
        at, _, digest_r = (digest_r or "").partition(":")
        if not digest_r or at != (seq_r or "0"):  # none, or left behind by a writer that
            self._init_digest()  # does not keep it (an older release, a hand edit)
            return
        ours = digest.hex_of(content)
        if digest_r == ours:
            if self.differs is not None:
                log.warning("%s: this replica's content equals Redis's again (digest %s)",
                            self.name, ours)
            self.differs, self._mended_at = None, None
            return
        why = (f"this replica's content differs from Redis's at seq {known[1]}: digest "
               f"{ours}, Redis's {digest_r}")
        now = self.clock()
        if self._mended_at is not None and now - self._mended_at < DIGEST_RETRY:
            self.differs = why + " (still, after a resync)"
            return
        log.error("%s: %s; resyncing", self.name, why)
        self.events.refused(self.name, "digest")
        self.differs = why
        self._mended_at = now
        self._resync_cause = "digest"

    def _init_digest(self) -> None:
        """Compute Redis's digest from Redis's own content (a list written before digests
        existed holds none, and the write scripts cannot start one), under WATCH: a write
        meanwhile voids it, and a later round tries again (at most once a DIGEST_RETRY)."""
        now = self.clock()
        if self._digest_tried_at is not None and now - self._digest_tried_at < DIGEST_RETRY:
            return
        self._digest_tried_at = now
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(self.keys.seq, self.keys.epoch, self.keys.digest)
                seq = pipe.get(self.keys.seq) or "0"
                at, _, held = (pipe.get(self.keys.digest) or "").partition(":")
                if held and at == seq:  # set meanwhile, by a writer or another replica
                    return
                content = digest.Digest.of((), {k: orjson.loads(v) for k, v in
                                                pipe.hgetall(self.keys.groups).items()})
                for key, stored in pipe.hscan_iter(self.keys.entries, count=PAGE):
                    content.toggle(digest.entry_hash(key, stored))
                pipe.multi()
                pipe.set(self.keys.digest, f"{seq}:{content.hex}")
                pipe.execute()
            except redis.WatchError:
                log.info("%s: Redis's digest not set: the list changed while it was read; "
                         "trying again later", self.name)
                return
        log.warning("%s: Redis held no content digest at seq %s (none, or one a writer that "
                    "does not keep it left behind): set it to %s from Redis's entries",
                    self.name, seq, content.hex)

    def _check_changelog(self, excess: int | None) -> None:
        """Read the changelog through when its record count changed shape (None: whatever
        it is; forks.py). A seq held twice with different changes flags it until Redis's
        changelog is one history again (a reseed rewrites it); a replica holding a copy
        applies nothing meanwhile."""
        if excess is not None and excess == self._excess:
            return
        found = forks.scan(self.client, self.keys.stream, PAGE)
        self._excess, self.replays = excess, found.replays
        if found.fork and found.fork != self.forked:
            log.error("%s: %s. Writes are suspended and %s. Run `%s --force` against the "
                      "replica whose copy to keep: it rewrites the changelog as one history.",
                      self.name, found.fork, "this replica's copy stays as it is" if self.epoch
                      else "this replica serves what Redis holds", self._reseed_command())
            self._count_refusal("fork")
        elif found.replays and not found.fork:
            log.warning("%s: Redis's changelog repeats %d change(s) exactly (a replay); "
                        "they are skipped", self.name, len(found.replays))
        if found.missing:
            log.warning("%s: Redis's changelog has no record of %d seq(s) between its ends "
                        "(deleted by hand?): `GET /v1/banlist/changes` cannot serve them",
                        self.name, found.missing)
        if self.forked and not found.fork:
            log.warning("%s: Redis's changelog is one history again", self.name)
        self.forked = found.fork

    def _confirmed(self, at: float) -> None:
        """This copy equalled Redis's at `at` (staleness counts from the last such moment)."""
        self.synced_at = at
        self.reached()

    def _accept(self, epoch_r: str | None, seq_r: str | None, mine: list[Any],
                known: tuple[int, int, str]) -> bool:
        """False (and alert) when Redis's banlist is older than or diverges from this copy.

        `known` is (epoch, seq, stream id) of this copy taken before Redis was read: anything
        applied by then was committed in Redis before the read, so a lower seq there is a
        rewind. `mine` is Redis's stream record at or before that stream id (XREVRANGE).
        """
        epoch, version, sid = known
        if not epoch:
            return True
        cause = "backward"  # rearrange_redis_refusals_total{cause}
        if epoch_r is None:
            why, cause = (f"Redis holds no {self.name} (restarted empty or flushed) but this "
                          f"replica holds epoch {epoch} seq {version}"), "lost"
        elif int(epoch_r) != epoch:
            if self._reseeded_over(epoch_r):
                return True
            why = (f"Redis holds another {self.name} history (epoch {epoch_r}) than this "
                   f"replica (epoch {epoch} seq {version})")
        elif int(seq_r or 0) < version:
            why = (f"Redis went backwards: seq {seq_r} < this replica's {version} "
                   f"(epoch {epoch})")
        elif sid != "0-0" and mine and mine[0][0] != sid:  # ours is gone, an older one is not
            why, cause = _forked(epoch, version), "fork"
        elif self.diverged and not (why := self._why_still_refused(mine, known, seq_r)):
            log.warning("%s: Redis caught up with this replica again; following it", self.name)
            self.diverged = None
            self._unmark()
            return True
        elif not self.diverged:
            return True
        else:
            cause = "fork"  # still refused: a fork, or one the trimmed changelog cannot rule out
        if (self.epoch, self.version, self.stream_id) != known:
            return False  # the copy changed under us (a write, an adopt): judge next round
        self._refuse(why, cause)
        return False

    def _refuse(self, why: str, cause: str) -> None:
        if self.diverged != why:
            log.error("%s: refusing Redis's %s, still serving seq %d: %s. Run `%s` against "
                      "the replica with the copy to keep, or adopt Redis's "
                      "(POST /v1/admin/%s/adopt).", self.name, self.name, self.version, why,
                      self._reseed_command(), self.name)
            self._count_refusal(cause)
            self.diverged = why

    def _reseed_command(self) -> str:
        store = "" if self.name == "banlist" else f" --store {self.name}"
        return f"rearrange banlist reseed{store}"

    def _count_refusal(self, cause: str) -> None:
        self.events.refused(self.name, cause)

    def _why_still_refused(self, mine: list[Any], known: tuple[int, int, str],
                           seq_r: str | None) -> str:
        """Why a refused copy may not follow Redis yet ('' once Redis provably holds it)."""
        epoch, version, sid = known
        if mine:  # our last record is there: the one after it must not reuse a seq of ours
            after = self.client.xrange(self.keys.stream, min=f"({sid}", count=1)
            return _forked(epoch, version) if after and int(after[0][1]["seq"]) <= version else ""
        if self._reseed_after(str(epoch), sid):
            return ""  # an operator put a copy back after our last change: the stream says which
        return (f"Redis is back at seq {seq_r} but its changelog no longer reaches this "
                f"replica's seq {version} (epoch {epoch}; trimmed): whether it still holds "
                f"this replica's history cannot be told")

    def _reseed_after(self, epoch_r: str, sid: str) -> bool:
        """True when the stream starts with a `reseed` of `epoch_r` newer than `sid`."""
        head = self.client.xrange(self.keys.stream, count=1)
        return bool(head and head[0][1].get("op") == "reseed"
                    and head[0][1].get("epoch") == epoch_r
                    and _stream_pos(head[0][0]) > _stream_pos(sid))

    def _reseeded_over(self, epoch_r: str) -> bool:
        """True when an operator forced a reseed into Redis after our last change: follow it.

        A forced reseed restarts the stream with a `reseed` record of its epoch. One newer
        than anything this replica applied is a deliberate override; an older one (say, at
        the head of a lagging Redis replica promoted by a failover) is not.
        """
        if not self._reseed_after(epoch_r, self.stream_id):
            return False
        if self._resync_cause != "reseed":
            log.warning("%s: Redis was reseeded over this replica's history (epoch %s); "
                        "following it", self.name, epoch_r)
        self._resync_cause = "reseed"
        self.diverged = None
        return True

    def _apply_records(self, records: list[Any], observe: bool) -> None:
        """Apply records in order; a gap, a foreign epoch or a reseed asks for a resync instead,
        a seq this replica already holds after its last record is a fork (refused).

        The records' changes go to the index as one batch (one swap), and only then is the
        position they reach published: requests read `version` without the lock and report
        it as the banlist they were matched on, so never early. A bulk removal's records
        are held until its last is read (txn.py): what precedes it is published first.
        """
        now = self.clock()
        read = self._reading or txn.Reading(self.version, self.stream_id, self.epoch,
                                            self.digest)
        last = _stream_pos(read.stream_id)
        lags: list[float] = []
        changes = digest.Changes(self.index)
        for sid, f in records:
            if _stream_pos(sid) <= last:
                continue  # applied by a writer's catch-up while this XREAD was under way
            seq, rec_epoch = int(f["seq"]), int(f["epoch"])
            if rec_epoch != read.epoch and not (read.version == 0 and not read.epoch
                                                and seq == 1):
                self._resync_cause = "epoch"
                break
            if f["op"] == "reseed":
                if f.get("base") != read.stream_id:  # a copy other than ours was put back
                    self._resync_cause = "reseed"
                    break
                read.version, read.stream_id = seq, sid  # Redis now holds exactly our copy
                last = _stream_pos(sid)
                read.journal.append((seq, sid, f))
                continue
            if seq <= read.version:  # a seq we applied: a replay of the same change, or a fork
                if sid not in self.replays:
                    self._check_changelog(None)  # which of the two: read the changelog through
                if sid in self.replays:
                    read.stream_id, last = sid, _stream_pos(sid)  # the same change: already held
                    continue
                if not self.forked:  # our record of that seq is gone: nothing to compare with
                    self._refuse(_forked(read.epoch, read.version), "fork")
                break
            if seq != read.version + 1:
                self._resync_cause = "gap"
                break
            batch_end = txn.mark(f)
            if batch_end != read.end:  # a batch starts, or ends short (txn.py): what was
                if batch_end and read.changes:  # read before it is published first
                    self._publish(read)
                    read = txn.Reading(read.version, read.stream_id, read.epoch,
                                       read.content)
                read.end = batch_end
            change = _change(f)
            if change is not None:
                read.changes.append(change)
                read.content ^= record_hash(f, changes)
            read.journal.append((seq, sid, f))
            read.version, read.stream_id, read.epoch = seq, sid, rec_epoch
            last = _stream_pos(sid)
            if observe:
                lags.append(now - int(sid.partition("-")[0]) / 1000)
        self._reading = read if read.inside() else None
        if self._reading is None:
            self._publish(read)
        for lag in lags:
            self.events.applied(max(lag, 0.0))

    def _publish(self, read: txn.Reading) -> None:
        """Apply what was read as one index batch, and publish the position it leads to."""
        if read.changes or read.version != self.version:  # the version published with the data
            self.index.apply(read.changes, read.version)
        self.digest = read.content
        self.version, self.stream_id, self.epoch = read.version, read.stream_id, read.epoch
        for record in read.journal:
            self.journal.add(*record)

    def _read_from(self) -> str:
        """The stream id reading goes on from: past a bulk removal's records held."""
        return self.stream_id if self._reading is None else self._reading.stream_id

    def _settle(self, open_then: bool, seq_then: Any) -> None:
        """Apply a bulk removal held that is over short of its last seq (txn.py)."""
        if self._reading is not None and self._reading.closed(open_then, seq_then):
            log.warning("%s: a bulk removal ended at seq %d, short of its seq %d (a writer "
                        "that ignores batches removed some of its entries): applied",
                        self.name, self._reading.version, self._reading.end)
            read, self._reading = self._reading, None
            self._publish(read)

    def catch_up(self) -> None:
        """Apply everything committed so far (after our own write: read-your-writes)."""
        if self.forked and self.epoch:
            return  # the copy held stays as it is while Redis's changelog is forked
        try:
            with self.lock:
                pipe = self.client.pipeline(transaction=True)
                pipe.exists(self.keys.batch)
                pipe.get(self.keys.seq)
                open_then, seq_then = pipe.execute()
                while True:
                    page = self.client.xrange(self.keys.stream, min=f"({self._read_from()}",
                                              count=PAGE)
                    self._apply_records(page, observe=True)
                    if len(page) < PAGE or self._resync_cause:
                        break
                self._settle(open_then, seq_then)
        except redis.RedisError as exc:
            self.failed(exc)

    # ---- changes Redis lost (recovery.py) ---------------------------------------------------
    def _recover(self, epoch_r: str | None) -> bool:
        """Redis lost changes this copy holds: mark the loss in Redis, and when the journal
        tells exactly which, take Redis's copy and leave them to be written again (True)."""
        if self._marked:  # found out already: keep the mark (an adopt elsewhere drops it)
            recovery.mark(self.client, self.keys.lost, self.me, self.epoch, self.version,
                          self.diverged or "", None)
            return False
        lost = None
        if epoch_r is not None and int(epoch_r) == self.epoch:
            records = list(self.journal.records)
            at = recovery.branch(self.client, self.keys.stream, records)
            if at is not None and at >= 0:
                lost = recovery.lost_changes(records[at + 1:], records[at][0], self.index,
                                             self.clock())
        why = self.diverged or ""
        recovery.mark(self.client, self.keys.lost, self.me, self.epoch, self.version, why, lost)
        self._marked = True
        if lost is None or lost.unsupported or self.reapply is None:
            reason = (lost.unsupported if lost is not None and lost.unsupported else
                      "which changes were lost cannot be told from the last "
                      f"{len(self.journal.records)} this replica applied")
            log.error("%s: Redis lost changes this replica holds, and they cannot be written "
                      "again by themselves (%s). Every replica that follows Redis reports not "
                      "ready until `%s --reason …` is run against this replica (or Redis's "
                      "copy is adopted on it: POST /v1/admin/%s/adopt, accepting the loss)",
                      self.name, reason, self._reseed_command(), self.name)
            self.events.recovered(self.name, "operator", 0)
            return False
        log.warning("%s: Redis lost %d change(s) this replica holds (seq %d to %d; %s); "
                    "taking Redis's copy and writing them again: %s", self.name,
                    lost.changes, lost.first_seq, lost.last_seq, why, lost.describe())
        self.resync("recover", accept_backward=True)
        self.pending = lost
        return True

    def _pending_missing(self) -> str | None:
        """What /readyz says between taking Redis's copy and writing the lost changes back
        (the next round): the copy lacks them."""
        lost = self.pending
        if lost is None:
            return None
        return (f"this replica took Redis's copy, which lacks the {lost.changes} change(s) "
                f"Redis lost (seq {lost.first_seq} to {lost.last_seq}); it writes them back "
                "on its next round")

    def _reapply(self) -> None:
        """Write the changes Redis lost again (the store's writes, each confirmed by a Redis
        replica); on failure they stay pending, and the mark with them, for the next round."""
        lost, write = self.pending, self.reapply
        if lost is None or write is None:
            return
        try:
            unconfirmed = write(lost)
        except (BanlistError, redis.RedisError) as exc:
            log.warning("%s: the changes Redis lost are not written back yet (%s); trying "
                        "again", self.name, exc)
            return
        self._unmark()  # first: should Redis fail here, the next round drops it again
        self.pending = None
        self.events.recovered(self.name, "reapplied", lost.changes)
        log.warning("%s: wrote back the %d change(s) Redis lost (seq %d to %d)%s", self.name,
                    lost.changes, lost.first_seq, lost.last_seq,
                    f"; {unconfirmed} write(s) not confirmed by a Redis replica yet"
                    if unconfirmed else "")

    def _unmark(self) -> None:
        """Drop this replica's loss mark (it holds nothing Redis lacks any more)."""
        if self._marked:
            self.client.hdel(self.keys.lost, self.me)
        self._marked = False

    def forget_loss(self, replica: str) -> dict[str, Any]:
        """An operator's repair for a holder gone for good: its mark goes, and what it
        held is accepted as lost (BanlistNotFound when it holds no mark)."""
        if replica == self.me:
            raise BanlistConflict("replica", "that is this replica's own mark: adopt Redis's "
                                  f"copy on it (POST /v1/admin/{self.name}/adopt) or reseed")
        doc = recovery.forget(self.client, self.keys.lost, replica)
        if doc is None:
            raise BanlistNotFound("replica", f"no {self.name} loss mark of {replica!r} "
                                  f"(/readyz's {self.name}_missing names the marks)")
        self.marks.pop(replica, None)
        return doc

    def dropped_marks(self, everyone: bool) -> None:
        """An operator's repair: a reseed (Redis holds the copy again: every mark goes) or an
        adopt on this replica (it accepts the loss: its mark goes)."""
        self.pending = None
        if everyone:
            self.client.delete(self.keys.lost)
            self._marked = False
        else:
            self._marked = True
            self._unmark()

    # ---- full resync ----------------------------------------------------------------------
    def resync(self, cause: str, accept_backward: bool = False) -> None:
        """Load Redis's whole banlist aside, replay what changed meanwhile, swap it in."""
        for _ in range(3):
            known = (self.epoch, self.version, self.stream_id)
            pipe = self.client.pipeline(transaction=True)
            pipe.get(self.keys.epoch)
            pipe.get(self.keys.seq)
            pipe.xrevrange(self.keys.stream, count=1)
            pipe.xrevrange(self.keys.stream, max=known[2], min="-", count=1)
            pipe.exists(self.keys.batch)
            epoch_r, seq_r, last, mine, batch_open = pipe.execute()
            if not accept_backward and not self._accept(epoch_r, seq_r, mine, known):
                return
            if batch_open:
                raise txn.BatchUnderWay(f"a bulk removal is being written to Redis's "
                                        f"{self.name}: a copy read now would hold half of it; "
                                        "the resync waits for it")
            if epoch_r is None:
                with self.lock:
                    self._install(BanIndex(), 0, 0, "0-0", 0)
                self._resynced(cause)
                return
            groups = {k: tuple(orjson.loads(v))
                      for k, v in self.client.hgetall(self.keys.groups).items()}
            content = digest.Digest.of((), groups)

            def scan(content: digest.Digest = content) -> Iterator[Entry]:
                for key, stored in self.client.hscan_iter(self.keys.entries, count=PAGE):
                    content.toggle(digest.entry_hash(key, stored))
                    yield Entry.from_dict({"id": key, **orjson.loads(stored)})

            new = BanIndex(scan(), groups)
            epoch = int(epoch_r)
            scanned = (int(seq_r or 0), last[0][0] if last else "0-0")
            # changes committed while we scanned
            at = self._replay(new, content, epoch, *scanned)
            if at is None:
                continue  # not just the next changes (trimmed past us, a reseed): again
            with self.lock:
                # and the last few, with writers held off
                at = self._replay(new, content, epoch, *at)
                if at is None:
                    continue
                self._install(new, at[0], epoch, at[1], content.value)
            self._resynced(cause)
            return
        raise redis.RedisError("the changelog kept moving past the resync; will retry")

    def _replay(self, index: BanIndex, content: digest.Digest, epoch: int, seq: int,
                sid: str) -> tuple[int, str] | None:
        while True:
            page = self.client.xrange(self.keys.stream, min=f"({sid}", count=PAGE)
            batch, changes = [], digest.Changes(index)
            for rid, f in page:  # only the next change; a reseed, a rewind or a gap changed
                if int(f["seq"]) != seq + 1 or int(f["epoch"]) != epoch or f["op"] == "reseed":
                    return None  # what was scanned: start over
                if (change := _change(f)) is not None:
                    batch.append(change)
                    content.toggle(record_hash(f, changes))
                seq, sid = seq + 1, rid
            index.apply(batch)
            if page and txn.mark(page[-1][1]) > seq:
                return None  # inside a bulk removal (one opened during the scan): again
            if len(page) < PAGE:
                return seq, sid

    def _install(self, index: BanIndex, seq: int, epoch: int, stream_id: str,
                 content: int) -> None:
        if index.version != seq:
            index.apply((), seq)  # before it is served: the version travels in the snapshot
        self.index = index  # one reference: a request sees the old list or the new one
        self.digest = content
        self.journal.clear()  # no record led here: a loss right after cannot be told
        self._reading = None  # records read past the old copy: the new one is read on from
        self.version, self.epoch, self.stream_id = seq, epoch, stream_id
        self.loaded = True

    def _resynced(self, cause: str) -> None:
        self._resync_cause, self.diverged = None, None
        self._confirmed(self.clock())
        self.events.resynced(cause)
        # No gc.collect() here: a full collection over a million fresh objects would stall
        # every request for as long; the old index has no cycles, refcounting frees it.
        gc.freeze()  # the new index is long-lived: keep it out of every future collection
        log.info("%s: resynced (%s) to seq %d epoch %d, %d entries", self.name, cause,
                 self.version, self.epoch, len(self.index))
        self._write_snapshot(force=True)

    # ---- local snapshot, state --------------------------------------------------------------
    def _write_snapshot(self, force: bool = False) -> None:
        if self.snapshot_path is None or not self.loaded or self.version == self._snap_seq:
            return
        now = self.clock()
        if not force and now - self._snap_at < self.snapshot_seconds:
            return
        snap, data = self.dump()
        try:
            snapshot.write(self.snapshot_path, data)
        except OSError as exc:
            log.error("%s: local snapshot %s not written: %s", self.name, self.snapshot_path,
                      exc)
            return
        self._snap_seq, self._snap_at = snap.seq, now

    def dump(self) -> tuple[snapshot.Snapshot, bytes]:
        """This copy at one version, and its bytes (snapshot.py). The dump runs without the
        lock, so replication goes on meanwhile; when a change lands during it, it is made
        again, and the third time with the lock held (writers wait for it)."""
        for attempt in range(3):
            with self.lock:
                snap = snapshot.Snapshot(self.index, self.version, self.epoch, self.stream_id,
                                         self.synced_at, self.digest)
                if attempt == 2:
                    return snap, snapshot.encode(snap)
            data = snapshot.encode(snap)
            with self.lock:
                if self.index is snap.index and self.version == snap.seq:
                    return snap, data
        raise AssertionError("unreachable: the third dump holds the lock")

    def writable(self) -> bool:
        return (self.loaded and self.diverged is None and self.forked is None
                and self.policy.problem is None)

    def why_not_writable(self) -> str:
        if not self.loaded:
            return f"the {self.name} is not loaded yet (Redis unreachable since start)"
        why = self.forked or self.diverged or self.policy.problem
        return f"{self.name} writes are suspended: {why}"

    def state(self) -> SyncState:
        staleness = self.clock() - self.synced_at if self.loaded else float("inf")
        diverged = self.forked or self.diverged
        # a copy that refuses Redis holds what Redis lost; any other lacks it while another
        # replica's mark is there, and one that took Redis's copy lacks what it has yet to
        # write back (its own mark, read or not this round, says nothing of itself)
        others = {name: doc for name, doc in self.marks.items() if name != self.me}
        held = (recovery.missing(others, self.name, self.mark_watch.ages())
                if self.diverged is None else None)
        missing = ("; ".join(part for part in (self._pending_missing(), held) if part)
                   or self.differs)
        in_sync = (self.loaded and self.connected and diverged is None and missing is None
                   and self.problem is None and staleness <= 2 * self.block_ms / 1000 + 1)
        return SyncState("redis", in_sync, staleness, self.epoch, diverged, self.problem,
                         {"loaded": self.loaded, "stream_id": self.stream_id,
                          "digest": digest.hex_of(self.digest)}, missing)
