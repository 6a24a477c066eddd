"""The embedded banlist store: an index in memory, an append-only change log on disk."""
from __future__ import annotations

import contextlib
import fcntl
import gc
import itertools
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
from app.banlist.embedded.changelog import ChangeLog
from app.banlist.graveyard import Graveyard
from app.banlist.history import ChangeFilter
from app.banlist.index import BanIndex
from app.banlist.model import Entry, group_domains, group_name, iso
from app.errors import BanlistConflict, BanlistNotFound, BanlistUnavailable

__all__ = ["EmbeddedStore", "EntrySpec"]


TAIL = 10_000  # recent changes kept in memory; older history is read from the log file
BATCH = 10_000  # changes per write + fsync in a multi-entry commit (a seed, a large import)


class EmbeddedStore(StoreBase):
    """Single-process banlist: every change is fsynced to a JSON-lines log before it is applied.

    On start the log is replayed (see `changelog`: a torn last line or an unfinished last
    transaction, both never acknowledged, are dropped; anything else unreadable stops the
    start). Only the last `tail` changes stay in memory; older history is read from the log.
    Without a log file (benchmarks, tests) the whole history stays in memory.
    """

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.time,
                 tail: int | None = None, read_only: bool = False) -> None:
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
        self.loaded_at = clock()
        self._lock = threading.Lock()
        self._index_lock = self._lock
        if self.changelog is not None:
            self._pending: list[tuple[Any, ...]] = []  # replayed changes, applied in batches
            self._pending_adds: dict[str, Entry] = {}  # the adds among them, by id
            self._buried: list[tuple[Entry, dict[str, Any]]] = []  # and what they ended
            self.version = self.changelog.replay(self._apply, self._undo,
                                                 repair=not read_only)
            self._flush()
            self._tail.extend(self.changelog.read(self.version - tail, tail, self.changelog.size))
        gc.freeze()  # the index is long-lived: keep it out of every future collection

    def start(self) -> None:
        """Nothing runs in the background: every write is applied where it is made."""

    def close(self) -> None:
        """Let another process own the log (each write closes the log file it appended to)."""
        if self._release is not None:
            self._release()

    def refresh(self) -> None:
        """Nothing to catch up on: this store is its own source of truth."""

    def sync_state(self) -> SyncState:
        """The embedded store is its own source of truth: always in sync."""
        return SyncState("embedded", details={"digest": digest.hex_of(self.digest)})

    def dump(self) -> tuple[snapshot.Snapshot, bytes]:
        """The list at its version and its bytes, made with writes held off (the store is its
        own source: `synced_at` is now, epoch 0, no stream)."""
        with self._lock:
            snap = snapshot.Snapshot(self.index, self.version, 0, "", self.clock(), self.digest)
            return snap, snapshot.encode(snap)

    def _change_index(self, batch: list[tuple[Any, ...]]) -> None:
        """Every change to the index goes here, with the digest of what it then holds."""
        self.digest = digest.applied(self.index, self.digest, batch)
        self.index.apply(batch)

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
        with self._publishing(self._write(batches(), count)):  # durable, then applied
            # one batch: a request sees all of it or none
            self._change_index([*(("group", g.name, g.domains) for g in defined),
                         *(("add", e) for e in entries)])
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
            with self._publishing(self._commit(change)):
                self._change_index([("group", key, members)])
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
            with self._publishing(self._commit(change)):
                self._change_index([("remove", entry_id)])
            self.graveyard.bury([(entry, change)])
        return entry

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
            with self._publishing(self._commit(change)):
                self._change_index([("add", after)])  # in place of the entry of that id
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
                with self._publishing(self._commit(*changes, standalone=True)):
                    self._change_index([("remove", entry.id) for entry in expired])
                self.graveyard.bury(list(zip(expired, changes, strict=True)))
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

    def history(self, flt: ChangeFilter, since: int = 0, limit: int = 1000
                ) -> list[dict[str, Any]]:
        """Up to `limit` changes after seq `since` that `flt` keeps, from the whole log."""
        return history.select(self._changes_for(flt), flt, self.index.groups, since, limit)

    def former(self, canonical: str, host: str) -> list[dict[str, Any]]:
        """Entries that matched this canonical URL once and are gone (Graveyard.former)."""
        return self.graveyard.former(canonical, host, self.index)

    def history_since(self) -> str | None:
        """When the oldest change `former` knows of was made (None: no change yet): the
        log's first, unless the graveyard dropped older ones."""
        if self.graveyard.since is not None:
            return self.graveyard.since
        first = self.changes_since(0, 1)
        return first[0]["at"] if first else None

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
    def _publishing(self, end: int) -> Iterator[None]:
        """Publish `end` as the version once the block has applied the changes up to it:
        requests read `version` without the lock and report it as the banlist they were
        matched on, so never early; and whatever the block raises, since the log already
        holds those seqs and the next commit must not reuse them."""
        try:
            yield
        finally:
            self.version = end

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

    def _apply(self, change: dict[str, Any]) -> None:
        """A replayed change, queued: the index takes them BATCH at a time (one swap each)."""
        applied = index_change(change)
        if applied is None:
            return
        self._pending.append(applied)
        if applied[0] == "add":
            self._pending_adds[applied[1].id] = applied[1]
        elif applied[0] == "remove":
            entry_id = applied[1]
            self._bare_ends = self._bare_ends or "entry" not in change
            gone = self._pending_adds.pop(entry_id, None) or self.index.get(entry_id)
            if gone is not None:
                self._buried.append((gone, change))
        if len(self._pending) >= BATCH:
            self._flush()

    def _undo(self, ids: list[str]) -> None:
        self._pending.extend(("remove", entry_id) for entry_id in ids)

    def _flush(self) -> None:
        if self._pending:
            self._change_index(self._pending)
            self.graveyard.bury(self._buried)
            self._pending, self._pending_adds, self._buried = [], {}, []


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

