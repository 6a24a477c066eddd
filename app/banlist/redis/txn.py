"""What a replica has read of a bulk removal and not applied yet (batch.py writes it).

A bulk removal's records each carry `txn`, the seq its batch ends at. A replica applies
the records it reads in one index batch per read, as ever; when a read ends inside a
bulk removal, what it read of the removal is held here instead, and the next reads go
on from it, until the record of the batch's last seq is read: then the whole batch is
applied as one, and the version the replica serves moves once, from before the removal
to after it. Whatever the replica read before the batch's first record is applied first
(a writer's read of its own write before a batch opened waits for nothing).

A batch can end short of its last seq only when a writer that ignores batches removed
some of its entries meanwhile (an older release's): its records then stop before that
seq. Such a batch is applied once Redis no longer holds it open and every record up to
Redis's seq of that moment was read (`closed`), or when a record of no batch follows it.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis

from app.banlist.base import IndexChange
from app.banlist.redis.recovery import JOURNAL, Record

FIELD = "txn"  # on a bulk removal's record: the seq its batch ends at


def mark(fields: dict[str, str]) -> int:
    """The seq the batch of a record ends at (0: the record is of no batch)."""
    return int(fields.get(FIELD) or 0)


@dataclass(slots=True)
class Reading:
    """Records read since the copy was last published: where they lead (seq, stream id,
    epoch, digest), their index changes and journal records, and the seq the batch they
    are in ends at (0: none)."""

    version: int
    stream_id: str
    epoch: int
    content: int
    end: int = 0
    changes: list[IndexChange] = field(default_factory=list)
    journal: deque[Record] = field(default_factory=lambda: deque(maxlen=JOURNAL))

    def inside(self) -> bool:
        """Whether the last record read is of a batch not read to its end yet."""
        return self.end > self.version

    def closed(self, open_then: bool, seq_then: Any) -> bool:
        """Whether a batch held here is over although its last seq was not read: Redis held
        no batch open when its seq was `seq_then`, and every record up to it was read."""
        return self.inside() and not open_then and self.version == int(seq_then or 0)


class BatchUnderWay(redis.RedisError):
    """A resync asked while a bulk removal is being written: retried after it (a copy read
    in the middle would hold half of it)."""
