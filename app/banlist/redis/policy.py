"""Redis's eviction policy: anything but `noeviction` may drop what the service relies on.

Each write leaves its outcome under a key with a TTL (the `volatile-*` policies evict those
first), and under an `allkeys-*` policy Redis may drop a list's entries or its changelog,
all without an error. So `maxmemory-policy` is read on every (re)connect and once a minute:
an evicting policy at start-up refuses the start (app/api/app.py); found later, it suspends
every write to Redis until the policy is `noeviction` again. A Redis that does not allow
CONFIG GET (renamed, ACL, managed services) cannot be checked: logged, not refused.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from app.banlist.events import StoreEvents
from app.banlist.redis.client import TextRedis

log = logging.getLogger(__name__)
SAFE = "noeviction"
RECHECK_SECONDS = 60.0  # a CONFIG SET without a reconnect is noticed within this


class EvictionPolicy:
    """What Redis's `maxmemory-policy` was at the last check, shared by every Redis user."""

    def __init__(self, events: StoreEvents, clock: Callable[[], float] = time.monotonic) -> None:
        self.events = events
        self.clock = clock
        self.policy: str | None = None  # as Redis last said; None: not read (yet)
        self.problem: str | None = None  # set while the policy evicts: why writes are suspended
        self.unchecked: str | None = None  # why the policy could not be read, when it could not
        self._checked_at = float("-inf")
        self._lock = threading.Lock()

    def watch(self, client: TextRedis, reconnected: bool) -> None:
        """Check on a (re)connect, and else once a RECHECK_SECONDS (each replication round
        calls this). A connection error propagates: the caller's round failed."""
        now = self.clock()
        with self._lock:
            if not reconnected and now - self._checked_at < RECHECK_SECONDS:
                return
            self._checked_at = now
        self.check(client)

    def check(self, client: TextRedis) -> None:
        try:
            policy = client.config_get("maxmemory-policy").get("maxmemory-policy")
        except redis.ResponseError as exc:  # CONFIG renamed away, or refused by an ACL
            self._unknown(f"CONFIG GET maxmemory-policy was refused: {exc}")
            return
        if policy is None:
            self._unknown("CONFIG GET maxmemory-policy answered nothing")
            return
        evicting = policy != SAFE
        self.events.policy_checked("evicting" if evicting else SAFE)
        with self._lock:
            was, self.policy, self.unchecked = self.problem, policy, None
            self.problem = refusal(policy) if evicting else None
        if self.problem and self.problem != was:
            log.error("Redis: %s; writes to Redis are suspended until it is %s", self.problem,
                      SAFE)
        elif was and not self.problem:
            log.warning("Redis: maxmemory-policy is %s again; writes resume", SAFE)

    def _unknown(self, why: str) -> None:
        self.events.policy_checked("unknown")
        with self._lock:
            was, self.unchecked, self.policy, self.problem = self.unchecked, why, None, None
        if was != why:
            log.warning("Redis: the eviction policy could not be checked (%s); not refusing "
                        "it. Make sure it is maxmemory-policy %s.", why, SAFE)


def refusal(policy: str) -> str:
    """The one-line reason an evicting policy is refused."""
    return (f"Redis's maxmemory-policy is {policy}, not {SAFE}: Redis may evict write "
            f"outcomes, a list's entries or its changelog without an error (set "
            f"`maxmemory-policy {SAFE}`, as deploy/redis/primary.conf does)")
