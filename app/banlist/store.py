"""The embedded banlist store: an index in memory, an append-only change log on disk."""
from __future__ import annotations

import gc
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from app.banlist.base import EntrySpec, SyncState, prepare, require_reason, validate_all
from app.banlist.index import BanIndex
from app.banlist.model import Entry, group_domains, group_name, iso
from app.errors import BanlistError

__all__ = ["EmbeddedStore", "EntrySpec", "read_specs"]

log = logging.getLogger(__name__)


class EmbeddedStore:
    """Single-process banlist: every change is fsynced to a JSON-lines log before it is applied.

    On start the log is replayed; a torn last line (a crash mid-write, never acknowledged)
    is dropped, any other unreadable line stops the start rather than lose entries silently.
    """

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self.version = 0
        self.index = BanIndex()
        self.changes: list[dict[str, Any]] = []
        self.loaded_at = clock()
        self._lock = threading.Lock()
        if path is not None:
            self._replay(path)
        gc.freeze()  # the index is long-lived: keep it out of every future collection

    def __len__(self) -> int:
        return len(self.index)

    def start(self) -> None:
        """Nothing runs in the background: every write is applied where it is made."""

    def close(self) -> None:
        """Nothing to release: each write closes the log file it appended to."""

    def refresh(self) -> None:
        """Nothing to catch up on: this store is its own source of truth."""

    def sync_state(self) -> SyncState:
        """The embedded store is its own source of truth: always in sync."""
        return SyncState("embedded")

    def reseed(self, actor: str, reason: str, force: bool = False) -> dict[str, Any]:
        raise BanlistError("banlist", "the embedded store has no Redis to reseed", status=409)

    def adopt(self) -> dict[str, Any]:
        raise BanlistError("banlist", "the embedded store has no Redis to adopt", status=409)

    def add(self, spec: EntrySpec, actor: str) -> Entry:
        """Validate, persist and index a new entry; returns it with its id."""
        return self.add_many([spec], actor)[0]

    def add_many(self, specs: list[EntrySpec], actor: str) -> list[Entry]:
        """Validate every spec first (all or nothing), then persist and index each."""
        now = self.clock()
        with self._lock:
            prepared = validate_all(specs, now, self.index.groups) if len(specs) > 1 else [
                prepare(specs[0], now, self.index.groups)]
            entries, changes = [], []
            for n, p in enumerate(prepared, self.version + 1):
                entry = p.entry(str(n), actor, now)
                entries.append(entry)
                changes.append({"seq": n, "op": "add", "entry": entry.as_dict(),
                                "actor": actor, "reason": p.reason, "at": iso(now)})
            self._commit(*changes)  # one fsync for the batch, before any of it is applied
            for entry in entries:
                self.index.add(entry)
        return entries

    def define_group(self, name: str, domains: list[str], actor: str,
                     reason: str) -> dict[str, Any]:
        """Define (or redefine) an org group; its bans follow the new membership."""
        key = group_name(name)
        members = group_domains(domains)
        why = require_reason(reason, "a group definition")
        with self._lock:
            change = {"seq": self.version + 1, "op": "group", "name": key,
                      "domains": list(members), "actor": actor, "reason": why,
                      "at": iso(self.clock())}
            self._commit(change)
            self.index.set_group(key, members)
        return change

    def remove(self, entry_id: str, actor: str, reason: str) -> Entry:
        """Lift an entry (an appeal); the removal is itself a logged change."""
        reason = require_reason(reason, "a removal")
        with self._lock:
            entry = self.index.get(entry_id)
            if entry is None:
                raise BanlistError("id", f"no active entry {entry_id!r}", status=404)
            self._commit({"seq": self.version + 1, "op": "remove", "id": entry_id,
                          "actor": actor, "reason": reason, "at": iso(self.clock())})
            self.index.remove(entry_id)
        return entry

    def sweep(self) -> int:
        """Drop expired entries, logging each expiry as a change; returns how many."""
        now = self.clock()
        with self._lock:  # writers run in the thread pool: never iterate the index unlocked
            expired = self.index.expired(now)
            for entry in expired:
                self._commit({"seq": self.version + 1, "op": "expire", "id": entry.id,
                              "actor": "system", "reason": "ttl elapsed", "at": iso(now)})
                self.index.remove(entry.id)
        return len(expired)

    def seed(self, specs: Iterable[EntrySpec], actor: str = "seed") -> int:
        """Import entries into an empty store (first start); returns how many were added."""
        if self.version:
            return 0
        count = 0
        for spec in specs:
            self.add(spec, actor)
            count += 1
        gc.freeze()
        return count

    def active(self) -> list[Entry]:
        """Unexpired entries, oldest first."""
        now = self.clock()
        with self._lock:
            return [e for e in self.index if e.expires_at is None or e.expires_at > now]

    def changes_since(self, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
        """The change log after `seq`."""
        return [c for c in self.changes if c["seq"] > seq][:limit]

    def _commit(self, *changes: dict[str, Any]) -> None:
        if self.path is not None:
            text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in changes)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        self.changes.extend(changes)
        self.version = changes[-1]["seq"]

    def _replay(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            return
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for n, line in enumerate(lines, 1):
            try:
                change = json.loads(line)
            except json.JSONDecodeError:
                if n == len(lines) and not line.endswith("\n"):
                    log.warning("banlist log %s: dropping a torn last line", path)
                    with path.open("r+", encoding="utf-8") as fh:
                        fh.truncate(sum(len(x.encode()) for x in lines[:-1]))
                    break
                raise BanlistError("banlist_path", f"{path}:{n} is not valid JSON") from None
            self._apply(change)

    def _apply(self, change: dict[str, Any]) -> None:
        if change["op"] == "add":
            self.index.add(Entry.from_dict(change["entry"]))
        elif change["op"] == "group":
            self.index.set_group(change["name"], tuple(change["domains"]))
        else:
            self.index.remove(change["id"])
        self.changes.append(change)
        self.version = change["seq"]


def read_specs(path: Path) -> list[EntrySpec]:
    """Entries of a JSON-lines file of {scope, value, reason, regions?} (the sample banlist)."""
    specs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            item = json.loads(line)
            specs.append(EntrySpec(item["scope"], item["value"], item["reason"],
                                   tuple(item.get("regions") or ())))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise BanlistError(f"{path}:{n}", f"not a banlist entry: {exc}") from exc
    return specs
