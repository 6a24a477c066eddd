"""Changes Redis lost that a replica of ours holds: found, marked, and written again.

Redis can lose changes every replica of ours already applied: a failover to a Redis
replica that had not received them (writes answered 503 `not_durable`, or any write when
the wait is off), or a Redis restored from an older copy (acknowledged changes too). The
replica then sees Redis go backwards, or a history that forked from its own. Rather than
refuse Redis until an operator picks a side, a replica that can tell exactly what was lost
writes it again:

- It keeps a journal of the last JOURNAL stream records it applied (seq, stream id and
  fields). The **branch** is the newest of them Redis still holds under the same stream id
  and seq: up to there both histories are one; after it, Redis lost them.
- The lost records' net effect on this replica's copy is the **plan**: entries they added
  and that are still active are added again (an add is idempotent: several replicas
  re-applying the same loss add each ban once; the id is new, since Redis may have given
  the old one to another change), entries they removed that Redis still holds are removed,
  edits and group definitions are made again with the values this copy holds.
- Before anything else the replica records the loss in Redis (`<prefix>{banlist}:lost`, a
  hash: replica → what it holds), which makes every replica that follows Redis report
  not ready (`banlist_missing`) until the changes are back: a replica started after the
  loss does not serve as if nothing were missing. Then it takes Redis's state (a resync),
  writes the plan through the ordinary write path (each write confirmed by a Redis replica)
  and removes its mark.

What cannot be re-applied this way is left to an operator, loudly, with the mark in place:
the branch is older than the journal (or the replica restarted since), a seed or reseed is
among the lost records, Redis came back empty or under another epoch. The replica then
refuses Redis as before and says which command repairs it (`rearrange banlist reseed`
from the replica holding the copy, which also clears every mark; or `adopt`, which
accepts the loss).
"""
from __future__ import annotations

import json
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.banlist.index import BanIndex
from app.banlist.model import Entry, iso
from app.banlist.redis.client import TextRedis

JOURNAL = 10_000  # stream records a replica remembers (about 0.5 KiB each)
Record = tuple[int, str, dict[str, str]]  # seq, stream id, fields


def replica_name() -> str:
    """This process as the loss mark names it: host and pid (unique on a fleet)."""
    return f"{socket.gethostname()}/{os.getpid()}"


class Journal:
    """The last JOURNAL records applied, contiguous and ending at the replica's version
    (emptied by a resync, which applies no records)."""

    def __init__(self, size: int = JOURNAL) -> None:
        self.records: deque[Record] = deque(maxlen=size)

    def add(self, seq: int, sid: str, fields: dict[str, str]) -> None:
        self.records.append((seq, sid, fields))

    def clear(self) -> None:
        self.records.clear()


def branch(client: TextRedis, stream: str, records: list[Record]) -> int | None:
    """The index in `records` of the newest record Redis's stream still holds as it is,
    -1 when it holds none of the newest ones but their predecessor cannot be told, None
    when Redis holds every one (nothing lost from the journal).

    Redis holds a prefix of the journal (the common history), then none of it: looked for
    by galloping back from the newest record and bisecting, O(log n) round trips. Records
    older than the changelog's retention are trimmed too; a gallop that lands among them
    finds no record held and answers -1, which the caller takes as "cannot tell"."""
    def held(i: int) -> bool:
        seq, sid, _ = records[i]
        got = client.xrange(stream, min=sid, max=sid, count=1)
        return bool(got) and int(got[0][1]["seq"]) == seq

    n = len(records)
    if n == 0 or held(n - 1):
        return None
    lost, step = n - 1, 1  # records[lost] is not held
    while True:
        probe = lost - step
        if probe < 0:
            if not held(0):
                return -1
            kept = 0
            break
        if held(probe):
            kept = probe
            break
        lost, step = probe, step * 2
    while lost - kept > 1:  # held at kept, not at lost
        mid = (kept + lost) // 2
        if held(mid):
            kept = mid
        else:
            lost = mid
    return kept


@dataclass
class Lost:
    """What Redis lost of this replica's history, as writes that put it back."""

    first_seq: int
    last_seq: int
    adds: list[Entry] = field(default_factory=list)
    removes: list[tuple[str, str, str]] = field(default_factory=list)  # id, actor, reason
    edits: list[tuple[Entry, str, str]] = field(default_factory=list)  # now, actor, reason
    groups: list[tuple[str, tuple[str, ...], str, str]] = field(default_factory=list)
    unsupported: str | None = None  # why it cannot be written again (a seed among them)

    @property
    def changes(self) -> int:
        return self.last_seq - self.first_seq + 1

    def describe(self) -> dict[str, Any]:
        return {"first_seq": self.first_seq, "last_seq": self.last_seq,
                "changes": self.changes, "adds": len(self.adds),
                "removes": len(self.removes), "edits": len(self.edits),
                "groups": len(self.groups)}


def lost_changes(lost: Iterable[Record], kept_seq: int, index: BanIndex,
                 now: float) -> Lost:
    """The net effect of the `lost` records (all after seq `kept_seq`) on `index`, the copy
    that applied them, as writes to make again on a Redis that holds the history up to
    `kept_seq` and whatever was written there since."""
    records = list(lost)
    out = Lost(records[0][0], records[-1][0])
    added: dict[str, bool] = {}
    removed: dict[str, tuple[str, str]] = {}
    edited: dict[str, tuple[str, str]] = {}
    groups: dict[str, tuple[str, str]] = {}
    for _seq, _sid, f in records:
        op, key = f["op"], f["key"]
        if op in ("seed", "reseed"):
            out.unsupported = f"a {op} is among the changes Redis lost"
            return out
        if op == "add":
            added[key] = True
        elif op in ("remove", "expire"):
            if key not in added and int(key) <= kept_seq:
                removed[key] = (f["actor"], f["reason"])
            added.pop(key, None)
            edited.pop(key, None)
        elif op == "edit" and key not in added:
            edited[key] = (f["actor"], f["reason"])
        elif op == "group":
            groups[key] = (f["actor"], f["reason"])
    for key in added:
        entry = index.get(key)
        if entry is not None and entry.unexpired(now):
            out.adds.append(entry)
    out.removes = [(key, actor, why) for key, (actor, why) in removed.items()]
    for key, (actor, why) in edited.items():
        entry = index.get(key)
        if entry is not None and entry.unexpired(now):
            out.edits.append((entry, actor, why))
    out.groups = [(name, tuple(index.groups[name]), actor, why)
                  for name, (actor, why) in groups.items() if name in index.groups]
    return out


def mark(client: TextRedis, key: str, name: str, epoch: int, version: int, why: str,
         lost: Lost | None, clock: float | None = None) -> None:
    """Record in Redis that this replica holds changes Redis lost (every replica reads it)."""
    doc = {"replica": name, "epoch": epoch, "seq": version, "why": why,
           "at": iso(clock if clock is not None else time.time()),
           "repair": "re-applying them" if lost and not lost.unsupported else
           "rearrange banlist reseed --reason … against this replica (or adopt Redis's "
           "copy on it to accept the loss)"}
    if lost is not None:
        doc["lost"] = lost.describe()
    client.hset(key, name, orjson.dumps(doc).decode())


STALE_MARK = 60.0  # seconds a holder has not refreshed its mark: it may be gone


class MarkWatch:
    """When each loss mark was last seen to change, by this process's monotonic clock: a
    holder rewrites its mark (`at`) every round, so one unchanged for STALE_MARK seconds
    is not being refreshed. Judged here rather than from `at` against this host's clock,
    which a skew between hosts would make say a live holder is gone."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.changed: dict[str, tuple[str, float]] = {}  # mark → (its text, seen since)

    def saw(self, marks: dict[str, str]) -> None:
        """The marks as this round read them."""
        now = self.clock()
        self.changed = {name: (raw, self.changed[name][1] if name in self.changed
                               and self.changed[name][0] == raw else now)
                        for name, raw in marks.items()}

    def ages(self) -> dict[str, float]:
        """Seconds since each mark was last seen to change."""
        now = self.clock()
        return {name: now - since for name, (_, since) in self.changed.items()}


def missing(marks: dict[str, str], structure: str = "banlist",
            ages: dict[str, float] | None = None) -> str | None:
    """What /readyz says while any replica holds changes Redis lost (None: none does).

    A holder refreshes its mark every round while the loss stands; one not refreshed for
    STALE_MARK seconds (`ages`, from a MarkWatch) is said to be so, with the call that
    forgets it (its replica gone for good, what it held is lost: an operator's decision,
    never taken by itself)."""
    if not marks:
        return None
    parts = []
    for name, raw in sorted(marks.items()):
        try:
            doc = json.loads(raw)
        except ValueError:
            parts.append(f"{name} (unreadable mark)")
            continue
        held = (f"seq {doc['seq']} (epoch {doc.get('epoch')})" if "seq" in doc else
                f"{doc.get('writes', 'some')} write(s)")
        part = f"{name} holds {held}: {doc.get('why')}; repair: {doc.get('repair')}"
        age = (ages or {}).get(name)
        if age is not None and age > STALE_MARK:
            part += (f" (its mark not refreshed for {age:.0f} s: if that replica is gone for "
                     f"good, `rearrange banlist forget-loss {name} --store {structure} "
                     "--reason …` accepts the loss)")
        parts.append(part)
    return ("changes Redis lost are held by other replicas and are not back yet: "
            + "; ".join(parts))


def forget(client: TextRedis, key: str, replica: str) -> dict[str, Any] | None:
    """Drop one replica's loss mark (an operator accepting the loss: that replica is gone
    for good); the mark as it was, None when it held none."""
    pipe = client.pipeline(transaction=True)
    pipe.hget(key, replica)
    pipe.hdel(key, replica)
    raw, _ = pipe.execute()
    if raw is None:
        return None
    doc: dict[str, Any] = json.loads(raw)
    return doc
