"""What a write script leaves in Redis, so a writer that lost the answer can settle it.

Every write script stores its result under `<prefix>{banlist}:write:<write id>` for the
changelog's retention. Setting that key to `aborted:<attempt>` first (SET NX) fences the
write off: if its script is still on its way, it sees the fence and refuses to run. So
after a lost answer the writer learns one of two things for certain, committed or never
will be, unless Redis stays unreachable; then the write id lets anyone ask later.
"""
from __future__ import annotations

import logging
import re
import time
from typing import Any

import orjson
import redis

from app.banlist.redis.client import TextRedis
from app.errors import BanlistError, BanlistUnavailable

log = logging.getLogger(__name__)
WRITE_ID = re.compile(r"[0-9a-f]{32}")
SETTLE_WAITS = (0.1, 0.3, 0.6, 1.0)  # seconds between tries to reach Redis again (2 s in all)


def settle(client: TextRedis, key: str, write_id: str, attempt: str, ttl_ms: int,
           cause: redis.RedisError) -> list[Any]:
    """The script's result if the write committed; BanlistUnavailable saying it was not made,
    or, while Redis stays unreachable, that the outcome is unknown (with the write id)."""
    for wait in SETTLE_WAITS:
        time.sleep(wait)
        try:
            fenced = client.set(key, f"aborted:{attempt}", nx=True, px=ttl_ms)
            outcome = None if fenced else client.get(key)
        except redis.RedisError:
            continue
        if outcome is None or outcome.startswith("aborted:"):
            raise BanlistUnavailable("banlist",
                                     f"Redis unreachable, the change was not made: {cause}")
        log.warning("banlist: write %s committed although its answer was lost (%s)",
                    write_id, cause)
        return seqs(outcome)
    raise BanlistUnavailable(
        "banlist", f"Redis went away while write {write_id} was sent ({cause}): whether it "
        "committed is unknown until Redis answers. It is all or nothing; "
        f"GET /v1/banlist/writes/{write_id} tells which (and, if it did not, makes sure it "
        "never will)", extra={"write_id": write_id, "outcome": "unknown"})


def state(client: TextRedis, key: str, write_id: str, ttl_ms: int) -> dict[str, Any]:
    """{committed, and if so its changes and seq range}; a write not found is fenced off."""
    if not WRITE_ID.fullmatch(write_id):
        raise BanlistError("write_id", "not a write id (32 hex digits)")
    client.set(key, "aborted:status", nx=True, px=ttl_ms)
    outcome = client.get(key)
    if outcome is None or outcome.startswith("aborted:"):
        return {"write_id": write_id, "committed": False}
    done = [s for s in seqs(outcome)[1:] if s]
    return {"write_id": write_id, "committed": True, "changes": len(done),
            "first_seq": done[0] if done else None, "last_seq": done[-1] if done else None}


def seqs(outcome: str) -> list[Any]:
    """A stored outcome as the script returns it: [epoch, seq of each change]."""
    r = orjson.loads(outcome)
    each = r["seqs"] if "seqs" in r else list(range(r["first"], r["last"] + 1))
    return [r["epoch"], *each]
