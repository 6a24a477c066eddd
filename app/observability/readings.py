"""Series /metrics shows that need Redis: the last good reading and its age, never a long wait.

A scrape starts a reading in a worker thread of its own (unless one is under way) and waits
at most `wait` seconds for it. A reading that fails, or is still running (Redis stopped or
slow), leaves the last good value in place, and `rearrange_redis_reading_age_seconds` says
how old that is: the scrape answers 200 whatever Redis does, exactly when alerts matter.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

import redis

from app.observability.metrics import Metrics

log = logging.getLogger(__name__)
T = TypeVar("T")
WAIT_SECONDS = 0.5  # a scrape waits this long at most for a fresh reading


class LastReading(Generic[T]):
    """`read()` run for each scrape, off the event loop; the last value that succeeded."""

    def __init__(self, name: str, read: Callable[[], T], metrics: Metrics,
                 wait: float = WAIT_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.read = read
        self.metrics = metrics
        self.wait = wait
        self.clock = clock
        self.value: T | None = None
        self.read_at: float | None = None
        self._failing: str | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"reading-{name}")
        self._future: Future[None] | None = None
        self._lock = threading.Lock()

    async def get(self) -> tuple[T | None, float]:
        """(the last good value or None, its age in seconds: inf before the first)."""
        with self._lock:
            if self._future is None or self._future.done():
                self._future = self._pool.submit(self._read)
            future = self._future
        with contextlib.suppress(TimeoutError):  # still reading: answer with the last value
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.wait)
        age = float("inf") if self.read_at is None else self.clock() - self.read_at
        self.metrics.redis_reading_age.labels(self.name).set(age)
        return self.value, age

    def _read(self) -> None:
        try:
            value = self.read()
        except (redis.RedisError, ValueError, KeyError, TypeError) as exc:  # down, or bad data
            self.metrics.banlist_redis_errors.labels("reading").inc()
            if self._failing is None:
                log.warning("metrics: reading %s failed, /metrics shows the last one "
                            "(rearrange_redis_reading_age_seconds): %r", self.name, exc)
            self._failing = str(exc)
            return
        if self._failing is not None:
            log.info("metrics: reading %s works again", self.name)
        self.value, self.read_at, self._failing = value, self.clock(), None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
