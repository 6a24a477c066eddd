"""Whether Redis's changelog is one history: each seq in it once.

Every write script numbers its changes with INCR and appends them to the stream in the same
step, a reseed or a seed restarts the stream, and retention trims only the oldest records;
so a whole changelog holds exactly `last seq - first seq + 1` records. Counting that is
O(1) (XLEN and the two ends, read with the replica's round). A count that is off means a
seq appears twice (Redis replayed writes it had refused, a writer wrote after a rewind) or
records went missing; only then is the stream read through, to tell a **fork** (one seq,
two different changes) from a **replay** (the same change twice: harmless, skipped).
"""
from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass
from typing import Any

from app.banlist.redis.client import TextRedis

# The fields that make a change what it is (the stream id is only where it was written)
CONTENT = ("epoch", "op", "key", "payload", "actor", "reason", "base", "previous")


def excess(length: int, first: list[Any], last: list[Any]) -> int:
    """Records beyond one per seq between the stream's ends: 0 for a whole changelog,
    more when a seq appears twice, less when records are missing."""
    if not length or not first or not last:
        return 0
    return length - (int(last[0][1]["seq"]) - int(first[0][1]["seq"]) + 1)


def forked(seq: int, first_id: str | None, again_id: str) -> str:
    """The refusal of a changelog that holds `seq` twice with different changes (`first_id`
    None: the first record of it was trimmed, only the order tells)."""
    where = (f"stream ids {first_id} and {again_id}" if first_id
             else f"again at stream id {again_id}, after higher seqs")
    return (f"Redis's history was rewritten: its changelog holds seq {seq} twice with "
            f"different changes ({where}; a replay of refused writes, or writes after a "
            f"rewind)")


@dataclass(frozen=True, slots=True)
class Finding:
    """What reading the whole changelog found."""

    fork: str | None  # why it is not one history (None: it is, replays aside)
    replays: frozenset[str]  # stream ids of records that repeat an earlier record exactly
    missing: int  # seqs between the ends with no record at all


def _digest(fields: dict[str, str]) -> int:
    h = hashlib.blake2b(digest_size=8)
    for name in CONTENT:
        h.update(fields.get(name, "").encode())
        h.update(b"\0")
    return int.from_bytes(h.digest(), "little", signed=True)


def scan(client: TextRedis, stream: str, page: int) -> Finding:
    """Read the changelog from its oldest record; the first seq met twice with different
    changes is a fork. Eight bytes per record (a digest per seq), however long it is."""
    digests = array("q")  # the digest of seq `base + n` at n, 0 while none was met
    base: int | None = None
    replays: set[str] = set()
    start = "-"
    while True:
        records = client.xrange(stream, min=start, count=page)
        for sid, fields in records:
            seq, digest = int(fields["seq"]), _digest(fields) or 1
            base = seq if base is None else base
            n = seq - base
            if n < 0:  # below the oldest seq: its first record is gone, nothing to compare
                return Finding(forked(seq, None, sid), frozenset(replays), 0)
            if n >= len(digests):
                digests.extend([0] * (n + 1 - len(digests)))
            if digests[n] == 0:
                digests[n] = digest
            elif digests[n] != digest:
                first = _first_id(client, stream, seq, page)
                return Finding(forked(seq, first, sid), frozenset(replays), 0)
            else:
                replays.add(sid)
        if len(records) < page:
            return Finding(None, frozenset(replays), digests.count(0))
        start = f"({records[-1][0]}"


def _first_id(client: TextRedis, stream: str, seq: int, page: int) -> str | None:
    """The stream id of the oldest record numbered `seq` (a second read: only for a fork)."""
    start = "-"
    while records := client.xrange(stream, min=start, count=page):
        for sid, fields in records:
            if int(fields["seq"]) == seq:
                return sid
        start = f"({records[-1][0]}"
    return None
