"""The embedded banlist store: an index in memory, an append-only change log on disk."""
from __future__ import annotations

import contextlib
import fcntl
import gc
import itertools
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from app.banlist import digest, history, snapshot
from app.banlist.base import (
    EntryEdit,
    EntrySpec,
    GroupSpec,
    IndexChange,
    StoreBase,
    SyncState,
    index_change,
    new_groups,
    plan,
    prepare,
    require_reason,
    validate_all,
)
from app.banlist.edits import edit_change, editable, revise
from app.banlist.embedded import checkpoint, former
from app.banlist.embedded.changelog import UNDO, ChangeLog
from app.banlist.events import StoreEvents
from app.banlist.graveyard import Graveyard
from app.banlist.history import ChangeFilter
from app.banlist.index import BanIndex
from app.banlist.model import Entry, group_domains, group_name, iso
from app.banlist.selection import Selection
from app.errors import BanlistConflict, BanlistNotFound, BanlistUnavailable

__all__ = ["EmbeddedStore", "EntrySpec"]

log = logging.getLogger(__name__)
TAIL = 10_000  # recent changes kept in memory; older history is read from the log file
BATCH = 10_000  # changes per write + fsync in a multi-entry commit (a seed, a large import)
REPLAY_BATCH = 100_000  # changes after a snapshot per index batch (each copies what it touches)
# changes since the last snapshot that make the next one due at the next housekeeping poll
# (else `snapshot_seconds` after the last one): a start replays at most about this many
SNAPSHOT_CHANGES = 10_000


class EmbeddedStore(StoreBase):
    """Single-process banlist: every change is fsynced to a JSON-lines log before it is applied.

    On start the snapshot beside the log (`<log>.snapshot`, checkpoint.py) is loaded and
    only the log after it replayed; without one that fits, the whole log (see `changelog`:
    a torn last line or an unfinished last transaction, both never acknowledged, are
    dropped; anything else unreadable stops the start). The snapshot is written again after
    a seed, from the housekeeping (`keep_snapshot`) and at close, never by a read-only store.
    Only the last `tail` changes stay in memory; older history, and the former entries
    (`former`), are read from the log. Without a log file (benchmarks, tests) the whole
    history stays in memory.
    """

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.time,
                 tail: int | None = None, read_only: bool = False,
                 snapshot_seconds: float = 300.0, events: StoreEvents | None = None,
                 name: str = "banlist") -> None:
        tail = TAIL if tail is None else tail
        self.path = path
        self.clock = clock
        # A log has one writer: a second one (say, a second uvicorn worker) appending to it
        # would hand out the same seqs and leave a log no start can replay. Read-only stores
        # (a frozen list: benchmarks, several workers without Redis) share the log with each
        # other, never with a writer.
        self.read_only = read_only
        held = _lock(path, read_only) if path is not None else None
        # released by close(), or when the store is collected (a test's "restart")
        self._release = weakref.finalize(self, held.close) if held is not None else None
        self.version = 0
        self.index = BanIndex()
        self.digest = 0  # of the index's content (app/banlist/digest.py)
        self.changelog = ChangeLog(path) if path is not None else None
        self._tail: deque[dict[str, Any]] = deque(maxlen=tail if path is not None else None)
        # Removals and expiries logged before they carried their entry: a filtered read of
        # the log then has to find them by id (history.Matcher).
        self._bare_ends = False
        self.graveyard = Graveyard()  # what lookup shows as `former`
        # filled from the end of the log on first use (_fill_graveyard); meanwhile the ends
        # committed while it reads the log wait in `_burying`
        self._graveyard_filled = self.changelog is None
        self._burying: list[tuple[Entry, dict[str, Any]]] | None = None
        self._fill_lock = threading.Lock()
        self.loaded_at = clock()
        self._lock = threading.Lock()
        self._index_lock = self._lock
        self.snapshot_path = checkpoint.path_of(path) if path is not None else None
        self.snapshot_seconds = snapshot_seconds
        self._snap_lock = threading.Lock()  # one writer of the snapshot file at a time
        self._snap_seq, self._snap_at = 0, clock()  # the seq of the last snapshot, and when
        self._snap_failed = False  # the last try to write one failed
        if self.changelog is not None:
            result = self._replay(self.changelog, repair=not read_only)
            if events is not None:
                events.embedded_start(name, result)
            self._tail.extend(self.changelog.read(self.version - tail, tail, self.changelog.size))
        gc.freeze()  # the index is long-lived: keep it out of every future collection

    def _replay(self, changelog: ChangeLog, repair: bool) -> str:
        """The snapshot and the log after it, else the whole log; how it started (`snapshot`,
        `replay`: no snapshot, `refused`: one that did not fit, logged).

        The whole log goes to the index as one stream of changes (one copy of the index,
        made as the lines are read; its digest made once, at the end); the few changes after
        a snapshot in batches of REPLAY_BATCH, the digest following them."""
        loaded = checkpoint.load(self.snapshot_path, changelog) if self.snapshot_path else "replay"
        if isinstance(loaded, str):
            self.index.apply(self._index_changes(changelog.replay(repair)))
            # the log's seq is known once the replay has read it, not when apply is called
            self.version, self.digest = changelog.seq, int(self.index.digest(), 16)
            self.index.apply((), self.version)  # before any request reads it
            return loaded
        snap, at = loaded
        self.index, self.digest, self._bare_ends = snap.index, snap.digest, at.bare_ends
        changelog.marks, changelog.first_end = at.marks, at.first_end
        changes = self._index_changes(changelog.replay(repair, (at.offset, snap.seq)))
        while batch := list(itertools.islice(changes, REPLAY_BATCH)):
            self._change_index(batch)
        self.version, self._snap_seq = changelog.seq, snap.seq
        self.index.apply((), self.version)  # before any request reads it
        log.info("banlist log %s: started from its snapshot at seq %d, then %d changes",
                 changelog.path, snap.seq, self.version - snap.seq)
        return "snapshot"

    def _index_changes(self, changes: Iterator[dict[str, Any]]) -> Iterator[IndexChange]:
        """Replayed changes as the index applies them (an unfinished transaction's adds
        taken out again at the end)."""
        for change in changes:
            if change["op"] == UNDO:
                yield from (("remove", entry_id) for entry_id in change["ids"])
                yield from (("add", Entry.from_dict(e)) for e in change.get("entries", ()))
            elif (applied := index_change(change)) is not None:
                if applied[0] == "remove":
                    self._bare_ends = self._bare_ends or "entry" not in change
                yield applied

    def start(self) -> None:
        """Nothing runs in the background: every write is applied where it is made."""

    def close(self) -> None:
        """Write the snapshot, and let another process own the log (each write closes the
        log file it appended to)."""
        if self._release is not None and self._release.alive:
            try:
                self.write_snapshot()
            finally:
                self._release()

    def refresh(self) -> None:
        """Nothing to catch up on: this store is its own source of truth."""

    def sync_state(self) -> SyncState:
        """The embedded store is its own source of truth: always in sync."""
        return SyncState("embedded", details={"digest": digest.hex_of(self.digest)})

    def dump(self) -> tuple[snapshot.Snapshot, bytes]:
        """The list at its version and its bytes (the store is its own source: `synced_at`
        is now, epoch 0, no stream)."""
        return self._dump(with_log=False)

    def keep_snapshot(self) -> bool:
        """The housekeeping's poll: write the snapshot if it is due (SNAPSHOT_CHANGES changes
        since the last, or any change `snapshot_seconds` after it); whether it was written.
        OSError when the write fails (the housekeeping counts and logs it), after which the
        next try waits `snapshot_seconds` whatever the changes."""
        behind, waited = self.version - self._snap_seq, self.clock() - self._snap_at
        if behind <= 0 or (waited < self.snapshot_seconds
                           and (behind < SNAPSHOT_CHANGES or self._snap_failed)):
            return False
        return self._write_snapshot()

    def write_snapshot(self) -> bool:
        """Write the snapshot now (after a seed, at close); whether it was written. A failed
        write is logged: the last snapshot, or the whole log, serves the next start."""
        try:
            return self._write_snapshot()
        except OSError as exc:
            log.error("banlist log %s: snapshot %s not written (the last one, or the whole "
                      "log, serves the next start): %s", self.path, self.snapshot_path, exc)
            return False

    def _write_snapshot(self) -> bool:
        """Write `<log>.snapshot` (atomically) of the list as it is now, unless it is the one
        written last, or the store is read-only or its log failed. Writes are held off only
        while the index is dumped, at worst (`_dump`)."""
        if self.snapshot_path is None or self.read_only or self.version == self._snap_seq:
            return False
        with self._snap_lock:
            if self.changelog is None or self.changelog.broken or self.version == self._snap_seq:
                return False
            snap, data = self._dump(with_log=True)
            self._snap_at, self._snap_failed = self.clock(), True
            snapshot.write(self.snapshot_path, data)
            self._snap_seq, self._snap_failed = snap.seq, False
        return True

    def _dump(self, with_log: bool) -> tuple[snapshot.Snapshot, bytes]:
        """The index at one version and its bytes, dumped without the lock (the dump is
        made of one published copy of the index) unless a write landed meanwhile twice:
        the third dump holds writes off."""
        for attempt in range(3):
            with self._lock:
                log_at = None
                if with_log and self.changelog is not None:
                    log_at = checkpoint.position(self.changelog, self._bare_ends)
                snap = snapshot.Snapshot(self.index, self.version, 0, "", self.clock(),
                                         self.digest, log_at)
                if attempt == 2:
                    return snap, snapshot.encode(snap)
            data = snapshot.encode(snap)
            with self._lock:
                if self.version == snap.seq:
                    return snap, data
        raise AssertionError("unreachable: the third dump holds the lock")

    def _change_index(self, batch: list[tuple[Any, ...]], version: int | None = None) -> None:
        """Every change to the index goes here, with the digest of what it then holds, and
        the version it makes (None at start: the version is published once replayed)."""
        self.digest = digest.applied(self.index, self.digest, batch)
        self.index.apply(batch, version)

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]:
        raise BanlistConflict("banlist", "the embedded store has no Redis to reseed")

    def adopt(self) -> dict[str, Any]:
        raise BanlistConflict("banlist", "the embedded store has no Redis to adopt")

    def forget_loss(self, replica: str) -> dict[str, Any]:
        raise BanlistConflict("banlist", "the embedded store has no Redis to lose changes")

    def write_state(self, write_id: str) -> dict[str, Any]:
        raise BanlistNotFound("write_id", "the embedded store answers every write once it is "
                              "committed: it hands out no write ids")

    def put_import(self, groups: Sequence[GroupSpec], specs: list[EntrySpec], actor: str
                   ) -> tuple[list[str], list[tuple[Entry, bool]]]:
        """`put_many` with the org groups an import defines, written in the same write
        before the entries (which may name them; a crash that leaves the entries' transaction
        unfinished keeps the groups, changelog.py); returns the names of the
        groups it defined (one held with the same members is a no-op, one held with other
        members a 409 before anything is written) and the entries as put_many does."""
        self._writable()
        with self._lock:
            return self._add_all(specs, actor, groups)

    def _add_all(self, specs: list[EntrySpec], actor: str, groups: Sequence[GroupSpec] = ()
                 ) -> tuple[list[str], list[tuple[Entry, bool]]]:
        now = self.clock()
        defined = new_groups(groups, self.index.groups)
        known = {**self.index.groups, **{g.name: g.domains for g in defined}}
        prepared = validate_all(specs, now, known) if len(specs) != 1 else [
            prepare(specs[0], now, known)]
        todo = plan(prepared, self.index, now)
        del prepared
        first = self.version + len(defined) + 1  # the groups' changes come first
        entries = [p.entry(str(n), actor, now) for n, p in enumerate(todo.fresh, first)]
        if not entries and not defined:
            return [], todo.resolve(entries)
        at = iso(now)

        def batches() -> Iterator[list[dict[str, Any]]]:
            if defined:
                yield [{"seq": n, "op": "group", "name": g.name, "domains": list(g.domains),
                        "actor": actor, "reason": g.reason, "at": at}
                       for n, g in enumerate(defined, self.version + 1)]
            for start in range(0, len(entries), BATCH):
                yield [{"seq": int(e.id), "op": "add", "entry": e.as_dict(), "actor": actor,
                        "reason": e.reason, "at": at} for e in entries[start:start + BATCH]]

        count = len(defined) + len(entries)
        with self._publishing(self._write(batches(), count)) as end:  # durable, then applied
            # one batch: a request sees all of it or none
            self._change_index([*(("group", g.name, g.domains) for g in defined),
                         *(("add", e) for e in entries)], end)
        return [g.name for g in defined], todo.resolve(entries)

    def define_group(self, name: str, domains: list[str], actor: str,
                     reason: str) -> dict[str, Any]:
        """Define (or redefine) an org group; its bans follow the new membership."""
        key = group_name(name)
        members = group_domains(domains)
        why = require_reason(reason, "a group definition")
        self._writable()
        with self._lock:
            change = {"seq": self.version + 1, "op": "group", "name": key,
                      "domains": list(members), "actor": actor, "reason": why,
                      "at": iso(self.clock())}
            with self._publishing(self._commit(change)) as end:
                self._change_index([("group", key, members)], end)
        return change

    def remove(self, entry_id: str, actor: str, reason: str) -> Entry:
        """Lift an entry (an appeal); the removal is itself a logged change."""
        reason = require_reason(reason, "a removal")
        self._writable()
        with self._lock:
            entry = self.index.get(entry_id)
            if entry is None:
                raise BanlistNotFound("id", f"no active entry {entry_id!r}")
            change = {"seq": self.version + 1, "op": "remove", "id": entry_id,
                      "entry": entry.as_dict(), "actor": actor, "reason": reason,
                      "at": iso(self.clock())}
            with self._publishing(self._commit(change)) as end:
                self._change_index([("remove", entry_id)], end)
            self._bury([(entry, change)])
        return entry

    def remove_matching(self, selection: Selection, actor: str, reason: str) -> int:
        """Lift every active entry `selection` takes, as one transaction: one logged
        removal each (with actor and reason), written BATCH at a time, then one index
        batch, so that readers see the version move once, from before to after all of
        them. Returns how many. What is held meanwhile is the ids and the last removals
        the graveyard keeps, never every removal's change."""
        why = require_reason(reason, "a removal")
        self._writable()
        with self._lock:
            now = self.clock()
            count = selection.page(self.index, None, 0, now)[2]
            if not count:
                return 0
            ids: list[str] = []
            kept: deque[tuple[Entry, dict[str, Any]]] = deque(maxlen=self.graveyard.cap)
            content, at = self.digest, iso(now)

            def batches() -> Iterator[list[dict[str, Any]]]:
                nonlocal content
                taken = selection.entries(self.index, now)
                while page := list(itertools.islice(taken, BATCH)):
                    changes = []
                    for n, entry in enumerate(page, self.version + len(ids) + 1):
                        doc = entry.as_dict()
                        content ^= digest.entry_hash(entry.id, digest.stored(doc))
                        change = {"seq": n, "op": "remove", "id": entry.id, "entry": doc,
                                  "actor": actor, "reason": why, "at": at}
                        changes.append(change)
                        kept.append((entry, {"op": "remove", "seq": n, "at": at,
                                             "actor": actor, "reason": why}))
                    ids.extend(e.id for e in page)
                    yield changes
                if len(ids) != count:  # never (the lock holds the index still); raised
                    # inside the transaction, which then cuts what it wrote back off
                    raise AssertionError(f"{len(ids)} removals taken of {count} counted")

            with self._publishing(self._write(batches(), count)) as end:
                self.index.apply((("remove", i) for i in ids), end)  # one batch, streamed
                self.digest = content
            self._bury(list(kept))
        return count

    def edit(self, entry_id: str, edit: EntryEdit, actor: str) -> tuple[Entry, bool]:
        """Change an active entry's expiry or regions in place (edits.revise); the entry
        and whether it changed (an edit that changes nothing logs nothing)."""
        self._writable()
        with self._lock:
            now = self.clock()
            entry = editable(self.index.get(entry_id), entry_id, edit, now)
            after = revise(entry, edit, self.index, now)
            if after is None:
                return entry, False
            change = {"seq": self.version + 1, "op": "edit",
                      **edit_change(entry.as_dict(), after.as_dict()), "actor": actor,
                      "reason": edit.reason.strip(), "at": iso(now)}
            with self._publishing(self._commit(change)) as end:
                self._change_index([("add", after)], end)  # in place of the entry of that id
        return after, True

    def sweep(self) -> int:
        """Drop expired entries, logging each expiry as a change; returns how many.

        A read-only store logs nothing: expired entries stop matching all the same."""
        if self.read_only:
            return 0
        now = self.clock()
        with self._lock:  # writers run in the thread pool: never iterate the index unlocked
            expired = self.index.expired(now)
            if expired:  # one write and fsync, however many expired together; each line
                # stands alone, so a crash mid-write leaves some expiries logged, which
                # the next sweep would have logged anyway
                changes = [{"seq": self.version + n, "op": "expire", "id": entry.id,
                            "entry": entry.as_dict(), "actor": "system",
                            "reason": "ttl elapsed", "at": iso(now)}
                           for n, entry in enumerate(expired, 1)]
                with self._publishing(self._commit(*changes, standalone=True)) as end:
                    self._change_index([("remove", entry.id) for entry in expired], end)
                self._bury(list(zip(expired, changes, strict=True)))
        return len(expired)

    def seed(self, specs: Iterable[EntrySpec], actor: str = "seed",
             groups: Sequence[GroupSpec] = ()) -> int:
        """Import entries (and the org groups they name) into an empty store (first start);
        returns how many entries were added.

        All are validated first and committed as one transaction in batches of BATCH (one
        fsync each): a crash mid-seed leaves an unfinished transaction that the next start
        drops, so that start finds the store empty and seeds again from scratch.
        """
        items = list(specs)
        with self._lock:
            if self.version or not (items or groups):
                return 0
            self._writable()
            count = sum(1 for _, old in self._add_all(items, actor, groups)[1] if not old)
        gc.freeze()
        self.write_snapshot()  # at start, not on the request path: the next start loads it
        return count

    def changes_since(self, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
        """The change log after `seq`: from the recent tail in memory, else from the file."""
        seq = max(seq, 0)
        with self._lock:
            if seq >= self.version:  # nothing after it (and no index past sys.maxsize)
                return []
            first = self._tail[0]["seq"] if self._tail else self.version + 1
            if self.changelog is None or seq + 1 >= first:
                skip = seq + 1 - first
                return list(itertools.islice(self._tail, skip, skip + limit))
            size = self.changelog.size  # what is committed now; later appends are not read
        return self.changelog.read(seq, limit, size)

    def history(self, flt: ChangeFilter, since: int = 0, limit: int = 1000,
                before: int | None = None, newest: bool = False) -> list[dict[str, Any]]:
        """Up to `limit` changes with `since` < seq < `before` that `flt` keeps, from the
        whole log: the first, or with `newest` the last (history.select)."""
        return history.select(self._changes_for(flt), flt, self.index.groups, since, limit,
                              before, newest)

    def former(self, canonical: str, host: str) -> list[dict[str, Any]]:
        """Entries that matched this canonical URL once and are gone, the latest ended first
        (Graveyard.former): the graveyard's, filled from the end of the log on first use,
        then those ended before the oldest it keeps, found by a search of the log."""
        try:
            self._fill_graveyard()
            found = self.graveyard.former(canonical, host, self.index)
            if self.changelog is None or self.graveyard.since is None:  # it holds every end
                return found
            oldest = self.graveyard.oldest()
            with self._lock:
                size = self.changelog.size
                before = self.version + 1 if oldest is None else oldest
            return found + former.older(self.changelog, before, size, canonical, host,
                                        self.index, self._bare_ends)
        except OSError as exc:
            log.error("banlist log %s: former entries not read: %s", self.path, exc)
            raise BanlistUnavailable("banlist", f"the change log {self.path} could not be "
                                     f"read, no former entries: {exc}") from exc

    def history_since(self) -> str | None:
        """When the oldest change `former` knows of was made (None: no change yet): the
        log's first (without a log, unless the graveyard dropped older ones)."""
        if self.changelog is None and self.graveyard.since is not None:
            return self.graveyard.since
        first = self.changes_since(0, 1)
        return first[0]["at"] if first else None

    def _fill_graveyard(self) -> None:
        """On first use: the newest ends of the log, up to the graveyard's cap, read from the
        log's end (former.recent), then the ends committed while it was read."""
        if self._graveyard_filled:
            return
        with self._fill_lock:
            if self._graveyard_filled or self.changelog is None:
                return
            with self._lock:
                size, self._burying = self.changelog.size, []
                start = 0 if self._bare_ends else self.changelog.first_end
            gone: list[tuple[Entry, dict[str, Any]]] | None = None
            try:
                if start is not None:
                    gone, whole = former.recent(self.changelog, start, size, self.graveyard.cap,
                                                self._bare_ends)
                    self.graveyard.bury(gone)
                    if not whole:  # it holds the newest ends only: `former` searches the log
                        self.graveyard.since = gone[0][1]["at"]
            finally:
                with self._lock:
                    if gone is not None or start is None:
                        self.graveyard.bury(self._burying)
                        self._graveyard_filled = True
                    self._burying = None

    def _bury(self, gone: list[tuple[Entry, dict[str, Any]]]) -> None:
        """Entries a removal or a sweep just ended (with the writer lock): into the graveyard
        once it is filled; before, the log holds them for its first fill."""
        if self._graveyard_filled:
            self.graveyard.bury(gone)
        elif self._burying is not None:
            self._burying.extend(gone)

    def _changes_for(self, flt: ChangeFilter) -> Iterator[dict[str, Any]]:
        """What a filtered read has to look at, in seq order: from the log file the lines
        holding one of the filter's needles (and every removal or expiry, if some were
        logged without their entry), or every line from its start time on."""
        with self._lock:
            if self.changelog is None:  # the whole history is in memory
                return iter(list(self._tail))
            size = self.changelog.size
        needles = flt.needles(self.index.groups)
        start = self.changelog.offset_before(flt.start, size) if flt.start else 0
        if needles is None:
            return self.changelog.scan(start, size)
        if self._bare_ends:
            needles = [*needles, b'"op":"remove","id":', b'"op":"expire","id":']
        return self.changelog.search(needles, start, size)

    @contextlib.contextmanager
    def _publishing(self, end: int) -> Iterator[int]:
        """Publish `end` as the version once the block has applied the changes up to it
        (it hands `end` to `_change_index`, which publishes the version with the data:
        requests read both in one load of the index and report the version they matched);
        and whatever the block raises, since the log already holds those seqs and the
        next commit must not reuse them."""
        try:
            yield end
        finally:
            self.version = end
            if self.index.version != end:  # the block raised before it applied them
                self.index.apply((), end)

    def _writable(self) -> None:
        if self.read_only:
            raise BanlistConflict("banlist", "this replica's banlist is read-only "
                                  "(REARRANGE_BANLIST_READ_ONLY): write through Redis, or run "
                                  "one writable process")

    def _commit(self, *changes: dict[str, Any], standalone: bool = False) -> int:
        """Persist changes (one transaction, one fsync) before the caller applies them."""
        return self._write(iter([list(changes)]), len(changes), standalone)

    def _write(self, batches: Iterator[list[dict[str, Any]]], count: int,
               standalone: bool = False) -> int:
        """Make `count` changes after `version` durable as one transaction; returns the
        version they make, which the caller publishes once it has applied them (requests
        read `version` without the lock and report it as the banlist they were matched on).

        `standalone`: one write and fsync, but no transaction mark (Changelog.transaction).
        """
        first, end = self.version + 1, self.version + count
        recent: deque[dict[str, Any]] = deque(maxlen=self._tail.maxlen)
        if self.changelog is None:
            for batch in batches:
                recent.extend(batch)
        else:
            with self.changelog.transaction(first, end, standalone) as write:
                for batch in batches:
                    write(batch)
                    recent.extend(batch)
        self._tail.extend(recent)
        return end



def _lock(path: Path, shared: bool) -> IO[str]:
    """Hold the log against other processes: exclusively to write it, shared to read it.

    A POSIX lock on `<log>.lock`, released at exit however the process ends. It is the
    process's (two stores on one log in one process are not told apart, and closing one
    releases it): what it guards against is a second process, such as a second worker.
    """
    lock_path = path.with_name(path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(lock_path, "a+")  # noqa: SIM115 (held open while the store lives)
    try:
        fcntl.lockf(fh, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise BanlistUnavailable("banlist", f"the banlist log {path} is in use by {holder}: an "
                                 "embedded banlist has one writer, and read-only stores share it "
                                 "only with each other. Run one worker, several against Redis "
                                 "(REDIS_URL), or set REARRANGE_BANLIST_READ_ONLY=true on every "
                                 "process to serve a frozen list") from None
    if not shared:
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
    return fh

