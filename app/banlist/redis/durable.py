"""Durable acknowledgement: a write is answered 2xx only once a Redis replica holds it too.

Redis replicates asynchronously: the primary answers a write before any replica has it,
so a primary lost right after (killed, or cut off while Sentinel promotes a replica)
takes the write with it, and the promoted replica, then every replica of ours, never
hears of it. `WAIT n ms` blocks until n replicas acknowledge the replication offset of
the calling connection's last write. So after each write `confirm` sends, on one
connection, an INCR of a key beside the structure's and `WAIT`: replication is one
ordered stream, so a replica that acknowledges that INCR holds every write the primary
committed before it, ours included, whichever connection made it. That also confirms an
idempotent retry (an add that finds its ban already there) without writing it again.

How many acknowledgements to ask for (`REARRANGE_REDIS_WAIT_REPLICAS`): a number, or
`auto`: one while the primary has replicas, that is, while Sentinel knows of a replica of
the service, or the primary has had a replica connected since this process started, or
is set to `min-replicas-to-write` (then at least that many). A replica that drops off
still counts: the danger is exactly a replica that is not keeping up. A primary that has
never had a replica answers writes alone, as the contract allows.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from app.banlist.events import StoreEvents
from app.banlist.redis.client import TextRedis, sentinel_pool, where
from app.errors import BanlistNotDurable

log = logging.getLogger(__name__)
RECHECK_SECONDS = 60.0  # Sentinel's list of replicas and min-replicas-to-write, read again


class Durability:
    """How many replicas must acknowledge a write, and the wait for them (one per process,
    shared by every structure kept in Redis, as the eviction policy is)."""

    def __init__(self, events: StoreEvents, replicas: int | None = None, wait_ms: int = 1000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.events = events
        self.fixed = replicas  # None: auto (the module's docstring)
        self.wait_ms = wait_ms
        self.clock = clock
        self.connected_replicas = 0  # the most the primary reported connected at once (ROLE)
        self.sentinel_replicas = 0  # replicas Sentinel knows of the service, up or down
        self.min_replicas_to_write = 0  # the primary's setting (0: unset, or unreadable)
        self._checked_at = float("-inf")
        self._lock = threading.Lock()

    def required(self) -> int:
        """Acknowledgements a write needs before its 2xx (0: none, the primary has no replica)."""
        if self.fixed is not None:
            return self.fixed
        has_replicas = self.connected_replicas > 0 or self.sentinel_replicas > 0
        return max(1 if has_replicas else 0, self.min_replicas_to_write)

    def observe(self, role: list[Any]) -> None:
        """The primary's ROLE reply, read every replication round: its connected replicas."""
        if role and role[0] == "master":
            self.connected_replicas = max(self.connected_replicas, len(role[2]))

    def watch(self, client: TextRedis, reconnected: bool) -> None:
        """Read what Sentinel and the primary say of replicas on a (re)connect, and else once a
        RECHECK_SECONDS. A connection error propagates: the caller's round failed."""
        now = self.clock()
        with self._lock:
            if not reconnected and now - self._checked_at < RECHECK_SECONDS:
                return
            self._checked_at = now
        pool = sentinel_pool(client)
        if pool is not None:
            self.sentinel_replicas = _sentinel_replicas(pool)
        try:
            setting = client.config_get("min-replicas-to-write").get("min-replicas-to-write")
        except redis.ResponseError:  # CONFIG refused (an ACL, a managed service): not known
            setting = None
        self.min_replicas_to_write = int(setting or 0)

    def confirm(self, client: TextRedis, key: str, structure: str) -> int:
        """Block until the replicas `required` hold everything committed so far; the number
        that did. BanlistNotDurable when fewer did within the wait, or Redis went away."""
        need = self.required()
        if need == 0:
            self.events.durability(structure, "alone", 0.0)
            return 0
        started = time.monotonic()
        try:
            pipe = client.pipeline(transaction=False)  # one connection: WAIT waits for its writes
            pipe.incr(key)
            pipe.execute_command("WAIT", need, self.wait_ms)
            _, acked = pipe.execute()
        except redis.RedisError as exc:
            self.events.durability(structure, "not_durable", time.monotonic() - started)
            raise BanlistNotDurable(structure, f"the change was sent, but Redis went away "
                                    f"before a replica confirmed it ({exc}); send it again "
                                    "(an add is idempotent), or check it with a lookup",
                                    extra={"replicas_required": need}) from exc
        took = time.monotonic() - started
        if int(acked) < need:
            self.events.durability(structure, "not_durable", took)
            log.warning("%s: a write was confirmed by %s of %d replica(s) of %s within %d ms",
                        structure, acked, need, where(client), self.wait_ms)
            raise BanlistNotDurable(structure, f"the change is on the Redis primary, but "
                                    f"{acked} of the {need} replica(s) required confirmed it "
                                    f"within {self.wait_ms} ms: a failover now could lose it. "
                                    "Send it again (an add is idempotent) once Redis's "
                                    "replication is healthy",
                                    extra={"replicas_required": need,
                                           "replicas_confirmed": int(acked)})
        self.events.durability(structure, "confirmed", took)
        return int(acked)


def _sentinel_replicas(pool: Any) -> int:
    """How many replicas of the pool's service the first Sentinel that answers knows of."""
    for sentinel in pool.sentinel_manager.sentinels:
        try:
            return len(sentinel.sentinel_slaves(pool.service_name))
        except redis.RedisError:
            continue
    raise redis.ConnectionError(f"no Sentinel answered for {pool.service_name!r}")
