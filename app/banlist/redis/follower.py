"""One follower for every structure a replica keeps from Redis: the banlist, the quarantine
list, the sanction states and the config.

Each structure keeps a copy in this process (an index, the host states, the config served)
and follows Redis from it. What following means is the same for all four, and lives here:

- **rounds**: a thread runs `round(block)` over and over, each round reading where Redis is
  and applying what is new (blocking up to `block_seconds` on Redis when nothing is);
- **the primary**: every round reads `ROLE` in the same request as its reads
  (`Follower.primary`): a Redis that answers as a replica (a primary demoted by a failover
  that a plain REDIS_URL still names, or a Sentinel-managed connection that has not moved
  yet) is no source to follow, and its Sentinel pool is dropped so the next round asks the
  Sentinels; the primary's replicas are counted for durable writes (durable.py);
- **outages**: a failed round is counted (`rearrange_redis_errors_total{op}`), logged once
  per outage with its cause, and retried with a back-off from 0.1 s to 2 s; the copy keeps
  being served meanwhile. The first round that succeeds again is logged once too;
- **malformed data** in Redis (a record no writer of ours could write) and any other
  failure of a round are logged and counted, and the round retried after a second: a
  thread that died would leave the copy behind for good, silently;
- **losses**: a structure that finds Redis lost changes it holds marks it in Redis
  (recovery.py) so that every replica reports the structure not ready until the changes
  are back; `missing(marks)` says what the marks say.

How each structure tells that Redis went backwards or forked from its copy, and what it
does then, is its own (its changelog differs): the banlist and the quarantine list follow a
changelog stream (replica.py), the sanction states a stream numbering the writes to their
hash (app/sanctions/states.py), the config a stream of whole versions (app/config/replica.py).
"""
from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import redis

from app.banlist.redis.client import TextRedis, check_primary
from app.banlist.redis.durable import Durability

log = logging.getLogger(__name__)
BACKOFF = (0.1, 2.0)  # seconds: the first retry after a failed round, and the longest


class Follower(ABC):
    """A copy of one structure and the thread that keeps it following Redis."""

    def __init__(self, client: TextRedis, name: str, block_seconds: float,
                 redis_error: Callable[[str], None],
                 durability: Durability | None = None) -> None:
        self.client, self.name = client, name
        self.block_ms = int(block_seconds * 1000)
        self.durability = durability  # learns of the primary's replicas each round
        self.connected = False  # the last round reached Redis
        self.problem: str | None = None  # why the last round did not
        self._redis_error = redis_error  # counts a failure: rearrange_redis_errors_total{op}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    round_op = "replicate"  # the `op` a failed round is counted under

    @abstractmethod
    def round(self, block: bool) -> None:
        """Read where Redis is and apply what is new; with `block`, wait up to block_ms
        for something new. Raises redis.RedisError when Redis cannot be reached."""

    def after_round(self) -> None:  # noqa: B027 (a hook: most structures need none)
        """What a structure does after each round that succeeded (say, save a snapshot)."""

    def lost_contact(self) -> None:  # noqa: B027 (a hook: most structures need none)
        """What a structure forgets when Redis is lost (say, that it is in step)."""

    # ---- life cycle -----------------------------------------------------------------------
    def follow(self) -> None:
        """One round now (a start reads what Redis holds before it serves), then the thread."""
        try:
            self.round(block=False)
        except redis.RedisError as exc:
            self.failed(exc, self.round_op)
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-follower",
                                        daemon=True)
        self._thread.start()

    def halt(self) -> None:
        """Stop the thread (it ends within a blocking read and a retry)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.block_ms / 1000 + 6)

    def wait(self, seconds: float) -> None:
        """Sleep between rounds, woken by `halt`."""
        self._stop.wait(seconds)

    def _run(self) -> None:
        backoff = BACKOFF[0]
        while not self._stop.is_set():
            try:
                self.round(block=True)
                backoff = BACKOFF[0]
                self.after_round()  # inside the try: a failure there must not end the thread
            except redis.RedisError as exc:
                self.failed(exc, self.round_op)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF[1])
            except (ValueError, KeyError, TypeError) as exc:  # a malformed record in Redis
                self.problem = f"unreadable {self.name} data in Redis: {exc!r}"
                log.error("%s: %s", self.name, self.problem)
                self._redis_error(self.round_op)
                self._stop.wait(1.0)
            except Exception as exc:  # a thread that died would stop this copy for good
                self.problem = f"{self.name} replication error: {exc!r}"
                log.exception("%s: a replication round failed; retrying", self.name)
                self._redis_error(self.round_op)
                self._stop.wait(1.0)

    # ---- reaching Redis --------------------------------------------------------------------
    def primary(self, role: list[Any]) -> None:
        """The ROLE reply read in this round: ConnectionError unless it is the primary's;
        the primary's replicas are counted for durable writes."""
        check_primary(self.client, role)
        if self.durability is not None:
            self.durability.observe(role)

    def reached(self) -> None:
        """A round reached Redis (logged once, after an outage)."""
        if not self.connected and self.problem is not None and self.problem.startswith(
                "Redis unreachable"):
            log.warning("%s: Redis answers again", self.name)
        self.connected, self.problem = True, None

    def failed(self, exc: redis.RedisError, op: str = "replicate") -> None:
        """Redis could not be reached for `op`: counted always, logged once per outage."""
        if self.connected or self.problem is None:
            log.warning("%s: Redis unreachable, serving the copy held here: %s", self.name, exc)
        self.connected = False
        self.problem = f"Redis unreachable: {exc}"
        self._redis_error(op)
        self.lost_contact()
