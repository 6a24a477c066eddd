"""Following Redis: tail the changelog, detect gaps and rewinds, resync aside, keep a local copy."""
from __future__ import annotations

import gc
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import redis

from app.banlist import snapshot
from app.banlist.base import SyncState
from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso

if TYPE_CHECKING:
    from app.banlist.redis_store import RedisStore

log = logging.getLogger(__name__)
PAGE = 5000


def change_of(stream_id: str, f: dict[str, str]) -> dict[str, Any]:
    """A stream record in the shape of `GET /v1/banlist/changes` (the embedded log's shape)."""
    seq, op, key = int(f["seq"]), f["op"], f["key"]
    at = iso(int(stream_id.partition("-")[0]) / 1000)
    change: dict[str, Any] = {"seq": seq, "op": op}
    if op == "add":
        change["entry"] = {"id": key, **orjson.loads(f["payload"])}
    elif op == "group":
        change.update(name=key, domains=orjson.loads(f["payload"]))
    elif op == "seed":
        change["entries"] = int(key)
    elif op != "reseed":
        change["id"] = key
    change.update(actor=f["actor"], reason=f["reason"], at=at)
    return change


def _stream_pos(stream_id: str) -> tuple[int, int]:
    ms, _, n = stream_id.partition("-")
    return int(ms), int(n or 0)


def _apply(index: BanIndex, f: dict[str, str]) -> None:
    op, key = f["op"], f["key"]
    if op == "add":
        index.add(Entry.from_dict({"id": key, **orjson.loads(f["payload"])}))
    elif op == "group":
        index.set_group(key, tuple(orjson.loads(f["payload"])))
    elif op in ("remove", "expire"):
        index.remove(key)
    # "reseed" at seq = ours + 1 in our epoch: Redis now holds exactly our copy, nothing to do;
    # "seed" starts an epoch, so a replica meets it only as a reason to resync


class Replicator:
    """This process's copy of the banlist and the thread that keeps it equal to Redis's."""

    def __init__(self, store: RedisStore, block_seconds: float, snapshot_path: Path | None,
                 snapshot_seconds: float) -> None:
        self.client, self.keys, self.metrics = store.client, store.keys, store.metrics
        self.clock = store.clock
        self.block_ms = int(block_seconds * 1000)
        self.snapshot_path = snapshot_path
        self.snapshot_seconds = snapshot_seconds
        self.lock = threading.RLock()  # applying changes, swapping the index, copying it
        self.index = BanIndex()
        self.version = 0
        self.epoch = 0
        self.stream_id = "0-0"
        self.loaded = False  # holds a copy (from Redis or from the local snapshot)
        self.synced_at = 0.0  # wall time this copy was last confirmed equal to Redis's
        self.connected = False
        self.diverged: str | None = None
        self.problem: str | None = None
        self._resync_cause: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._snap_seq = -1
        self._snap_at = 0.0

    # ---- life cycle -----------------------------------------------------------------------
    def start(self) -> None:
        snap = snapshot.read(self.snapshot_path) if self.snapshot_path else None
        if snap is not None:
            self._install(snap.index, snap.seq, snap.epoch, snap.stream_id)
            self.synced_at, self._snap_seq = snap.synced_at, snap.seq
            log.info("banlist: loaded local snapshot seq %d epoch %d (%d entries)",
                     snap.seq, snap.epoch, len(snap.index))
        try:
            self.poll(block=False)
        except redis.RedisError as exc:
            self.failed(exc)
        self._thread = threading.Thread(target=self._run, name="banlist-replica", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.block_ms / 1000 + 6)
        self._write_snapshot(force=True)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                self.poll(block=True)
                backoff = 0.1
                self._write_snapshot()  # inside the try: a failed write must not end the thread
            except redis.RedisError as exc:
                self.failed(exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
            except (ValueError, KeyError, TypeError) as exc:  # a malformed record in Redis
                self.problem = f"unreadable banlist data in Redis: {exc!r}"
                log.error("banlist: %s", self.problem)
                self._stop.wait(1.0)
            except Exception as exc:  # a thread that died would stop this replica for good
                self.problem = f"replication error: {exc!r}"
                log.exception("banlist: replication round failed; retrying")
                self.metrics.banlist_redis_errors.labels("replicate").inc()
                self._stop.wait(1.0)

    def failed(self, exc: redis.RedisError, op: str = "replicate") -> None:
        if self.connected or self.problem is None:
            log.warning("banlist: Redis unreachable, serving the copy at seq %d: %s",
                        self.version, exc)
        self.connected = False
        self.problem = f"Redis unreachable: {exc}"
        self.metrics.banlist_redis_errors.labels(op).inc()

    # ---- one round: check where Redis is, read what is new --------------------------------
    def poll(self, block: bool) -> None:
        checked = self.clock()
        known = (self.epoch, self.version)  # before the read: a writer may apply more meanwhile
        epoch_r, seq_r = self.client.mget(self.keys.epoch, self.keys.seq)
        if not self._accept(epoch_r, seq_r, known):
            self.connected, self.problem = True, None  # reachable, but refused
            if block:
                self._stop.wait(self.block_ms / 1000)
            return
        if epoch_r is None:  # Redis and this replica both hold nothing yet
            self.loaded = True
            self._confirmed(checked)
            if self._resync_cause:  # a stream without an epoch: nothing sane to follow
                if block:
                    self._stop.wait(self.block_ms / 1000)
                return
            # else block on the stream itself: the very first change arrives at once
        elif self._resync_cause or not self.epoch:
            self.resync(self._resync_cause or "start")
            return
        got = self.client.xread({self.keys.stream: self.stream_id}, count=PAGE,
                                block=self.block_ms if block else None)
        records = got[0][1] if got else []
        with self.lock:
            self._apply_records(records, observe=True)
        if self._resync_cause is None and self.version >= int(seq_r or 0):
            self._confirmed(self.clock() if block and not records else checked)

    def _confirmed(self, at: float) -> None:
        """This copy equalled Redis's at `at` (staleness counts from the last such moment)."""
        self.synced_at, self.connected, self.problem = at, True, None

    def _accept(self, epoch_r: str | None, seq_r: str | None, known: tuple[int, int]) -> bool:
        """False (and alert) when Redis's banlist is older than or diverges from this copy.

        `known` is (epoch, seq) of this copy taken before Redis was read: anything applied
        by then was committed in Redis before the read, so a lower seq there is a rewind.
        """
        epoch, version = known
        if not epoch:
            return True
        if epoch_r is None:
            why = (f"Redis holds no banlist (restarted empty or flushed) but this replica "
                   f"holds epoch {epoch} seq {version}")
        elif int(epoch_r) != epoch:
            if self._reseeded_over(epoch_r):
                return True
            why = (f"Redis holds another banlist history (epoch {epoch_r}) than this replica "
                   f"(epoch {epoch} seq {version})")
        elif int(seq_r or 0) < version:
            why = (f"Redis went backwards: seq {seq_r} < this replica's {version} "
                   f"(epoch {epoch})")
        else:
            if self.diverged:
                log.warning("banlist: Redis caught up with this replica again; following it")
                self.diverged = None
            return True
        if (self.epoch, self.version) != known:
            return False  # the copy changed under us (a write, an adopt): judge next round
        if self.diverged != why:
            log.error("banlist: refusing to go backwards, still serving seq %d: %s. Run "
                      "`rearrange banlist reseed` against a replica with a good copy.",
                      self.version, why)
            self.metrics.banlist_backward_refused.inc()
            self.diverged = why
        return False

    def _reseeded_over(self, epoch_r: str) -> bool:
        """True when an operator forced a reseed into Redis after our last change: follow it.

        A forced reseed restarts the stream with a `reseed` record of its epoch. One newer
        than anything this replica applied is a deliberate override; an older one (say, at
        the head of a lagging Redis replica promoted by a failover) is not.
        """
        head = self.client.xrange(self.keys.stream, count=1)
        if not head or head[0][1].get("op") != "reseed" or head[0][1].get("epoch") != epoch_r:
            return False
        if _stream_pos(head[0][0]) <= _stream_pos(self.stream_id):
            return False
        if self._resync_cause != "reseed":
            log.warning("banlist: Redis was reseeded over this replica's history (epoch %s); "
                        "following it", epoch_r)
        self._resync_cause = "reseed"
        self.diverged = None
        return True

    def _apply_records(self, records: list[Any], observe: bool) -> None:
        """Apply records in order; a gap or a foreign epoch asks for a resync instead."""
        now = self.clock()
        for sid, f in records:
            seq, epoch = int(f["seq"]), int(f["epoch"])
            if epoch != self.epoch and not (self.version == 0 and not self.epoch and seq == 1):
                self._resync_cause = "epoch"
                return
            if seq <= self.version:  # already applied (our own write, or a replay): idempotent
                self.stream_id = sid
                continue
            if seq != self.version + 1:
                self._resync_cause = "gap"
                return
            _apply(self.index, f)
            self.version, self.stream_id, self.epoch = seq, sid, epoch
            if observe:
                lag = now - int(sid.partition("-")[0]) / 1000
                self.metrics.banlist_lag.observe(max(lag, 0.0))

    def catch_up(self) -> None:
        """Apply everything committed so far (after our own write: read-your-writes)."""
        try:
            with self.lock:
                while True:
                    page = self.client.xrange(self.keys.stream, min=f"({self.stream_id}",
                                              count=PAGE)
                    self._apply_records(page, observe=True)
                    if len(page) < PAGE or self._resync_cause:
                        break
        except redis.RedisError as exc:
            self.failed(exc)

    # ---- full resync ----------------------------------------------------------------------
    def resync(self, cause: str, accept_backward: bool = False) -> None:
        """Load Redis's whole banlist aside, replay what changed meanwhile, swap it in."""
        for _ in range(3):
            known = (self.epoch, self.version)
            pipe = self.client.pipeline(transaction=True)
            pipe.get(self.keys.epoch).get(self.keys.seq).xrevrange(self.keys.stream, count=1)
            epoch_r, seq_r, last = pipe.execute()
            if not accept_backward and not self._accept(epoch_r, seq_r, known):
                return
            if epoch_r is None:
                with self.lock:
                    self._install(BanIndex(), 0, 0, "0-0")
                self._resynced(cause)
                return
            groups = {k: tuple(orjson.loads(v))
                      for k, v in self.client.hgetall(self.keys.groups).items()}
            new = BanIndex(groups=groups)
            for key, payload in self.client.hscan_iter(self.keys.entries, count=PAGE):
                new.add(Entry.from_dict({"id": key, **orjson.loads(payload)}))
            epoch = int(epoch_r)
            at = (int(seq_r or 0), last[0][0] if last else "0-0")
            at = self._replay(new, epoch, *at)  # changes committed while we scanned
            if at is None:
                continue  # the stream was trimmed past our starting point meanwhile: again
            with self.lock:
                at = self._replay(new, epoch, *at)  # and the last few, with writers held off
                if at is None:
                    continue
                self._install(new, at[0], epoch, at[1])
            self._resynced(cause)
            return
        raise redis.RedisError("the changelog kept moving past the resync; will retry")

    def _replay(self, index: BanIndex, epoch: int, seq: int,
                sid: str) -> tuple[int, str] | None:
        while True:
            page = self.client.xrange(self.keys.stream, min=f"({sid}", count=PAGE)
            for rid, f in page:
                rseq = int(f["seq"])
                if rseq <= seq:
                    continue
                if rseq != seq + 1 or int(f["epoch"]) != epoch:
                    return None
                _apply(index, f)
                seq, sid = rseq, rid
            if len(page) < PAGE:
                return seq, sid

    def _install(self, index: BanIndex, seq: int, epoch: int, stream_id: str) -> None:
        self.index = index  # one reference: a request sees the old list or the new one
        self.version, self.epoch, self.stream_id = seq, epoch, stream_id
        self.loaded = True

    def _resynced(self, cause: str) -> None:
        self._resync_cause, self.diverged = None, None
        self._confirmed(self.clock())
        self.metrics.banlist_resyncs.labels(cause).inc()
        # No gc.collect() here: a full collection over a million fresh objects would stall
        # every request for as long; the old index has no cycles, refcounting frees it.
        gc.freeze()  # the new index is long-lived: keep it out of every future collection
        log.info("banlist: resynced (%s) to seq %d epoch %d, %d entries", cause,
                 self.version, self.epoch, len(self.index))
        self._write_snapshot(force=True)

    # ---- local snapshot, state --------------------------------------------------------------
    def _write_snapshot(self, force: bool = False) -> None:
        if self.snapshot_path is None or not self.loaded or self.version == self._snap_seq:
            return
        now = self.clock()
        if not force and now - self._snap_at < self.snapshot_seconds:
            return
        with self.lock:
            snap = snapshot.Snapshot(self.index, self.version, self.epoch, self.stream_id,
                                     self.synced_at)
            entries = self.index.frozen()  # a pinned copy, made one entry at a time
        try:
            snapshot.write(self.snapshot_path, snap, entries)
        except OSError as exc:
            log.error("banlist: local snapshot %s not written: %s", self.snapshot_path, exc)
            return
        self._snap_seq, self._snap_at = snap.seq, now

    def writable(self) -> bool:
        return self.loaded and self.diverged is None

    def why_not_writable(self) -> str:
        if not self.loaded:
            return "the banlist is not loaded yet (Redis unreachable since start)"
        return f"banlist writes are suspended: {self.diverged}"

    def state(self) -> SyncState:
        staleness = self.clock() - self.synced_at if self.loaded else float("inf")
        in_sync = (self.loaded and self.connected and self.diverged is None
                   and self.problem is None and staleness <= 2 * self.block_ms / 1000 + 1)
        return SyncState("redis", in_sync, staleness, self.epoch, self.diverged, self.problem,
                         {"banlist_loaded": self.loaded, "banlist_stream_id": self.stream_id})
