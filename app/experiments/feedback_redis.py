"""The impression store in Redis: a feedback reaching any replica finds the page, and the
tallies are the fleet's.

Keys, beside the banlist's (its prefix), in one hash slot (`{feedback}`):

- `<prefix>{feedback}:page:<request id>`: a hash of the page (`page`, its JSON), its
  `outcome` once a feedback gave it one, and `counted` once it is in the tallies; it
  expires when the window after the page was served ends;
- `<prefix>{feedback}:tallies:<experiment>`: `impressions`, `control`, `treatment`, `tie`,
  `feedback`, kept until deleted by hand;
- `<prefix>{feedback}:experiments`: the experiments with tallies.

`record` never waits on Redis: the pages go to this replica's copy (the embedded store's
`Pages`) and a queue, which a thread writes in pipelines, within FLUSH_SECONDS. While Redis
is unreachable the thread retries with a back-off, counting each failure
(`rearrange_redis_errors_total{op="feedback"}`) and logging once per outage; past QUEUE
pages waiting, the oldest are dropped and counted. A feedback needs Redis (answered 503
without it): the outcome and the tallies change in one Lua script, so that a second
feedback for a page, on any replica, replaces the first in the tallies exactly once.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import redis

from app.banlist.redis.client import TextRedis
from app.experiments.attribution import OUTCOMES, Counts, Outcome, Taken, attribute
from app.experiments.feedback import FeedbackEvents, Pages, not_found
from app.experiments.impressions import Impression, Team

log = logging.getLogger(__name__)
FLUSH_SECONDS = 0.05  # a page is in Redis this long after it was served, at most, when up
BATCH = 500  # pages per pipeline
QUEUE = 100_000  # pages waiting for Redis; the oldest go past it
BACKOFF = (0.1, 2.0)

# KEYS: the page, the tallies, the experiments. ARGV: the page's JSON, its TTL (ms), the
# experiment. A request id reused for another page starts it afresh (the earlier page's
# outcome stays in the tallies: it was an impression with its feedback).
RECORD = """
local current = redis.call('HGET', KEYS[1], 'page')
if current ~= ARGV[1] then
  if current then redis.call('HDEL', KEYS[1], 'outcome', 'counted') end
  redis.call('HSET', KEYS[1], 'page', ARGV[1])
end
if redis.call('HSETNX', KEYS[1], 'counted', '1') == 1 then
  redis.call('HINCRBY', KEYS[2], 'impressions', 1)
  redis.call('SADD', KEYS[3], ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: the page, the tallies. ARGV: the outcome ('' none), the page's JSON it was computed
# on, that JSON again to write if Redis has no page yet ('' when this replica did not serve
# it), its TTL (ms). {'gone'}, {'other', page} (another page under that id: compute
# again), or {'ok', the outcome replaced ('' none)}.
FEEDBACK = """
local page = redis.call('HGET', KEYS[1], 'page')
if not page then
  if ARGV[3] == '' then return {'gone', ''} end
  redis.call('HSET', KEYS[1], 'page', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  page = ARGV[3]
end
if page ~= ARGV[2] then return {'other', page} end
local previous = redis.call('HGET', KEYS[1], 'outcome') or ''
-- never below 0: tallies deleted by hand (a reset) while this page was kept
if previous ~= '' and tonumber(redis.call('HGET', KEYS[2], previous) or '0') > 0 then
  redis.call('HINCRBY', KEYS[2], previous, -1)
end
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'outcome')
else
  redis.call('HSET', KEYS[1], 'outcome', ARGV[1])
  redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
end
redis.call('HINCRBY', KEYS[2], 'feedback', 1)
return {'ok', previous}
"""


def encode(impression: Impression) -> str:
    """The page as Redis keeps it (the request id is the key's)."""
    return orjson.dumps({"experiment": impression.experiment, "unit": impression.unit,
                         "at": impression.at, "teams": impression.teams}).decode()


def decode(request_id: str, text: str) -> Impression:
    data = orjson.loads(text)
    teams: tuple[tuple[str, Team], ...] = tuple((str(d), t) for d, t in data["teams"])
    return Impression(request_id, str(data["experiment"]), str(data["unit"]),
                      float(data["at"]), teams)


class RedisImpressions:
    """Pages and tallies in Redis (`client`: the banlist store's), a copy of this replica's
    own pages here."""

    def __init__(self, client: TextRedis, prefix: str, window: float, max_bytes: int,
                 events: FeedbackEvents, clock: Callable[[], float] = time.time) -> None:
        self.client, self.window, self.events, self.clock = client, window, events, clock
        self.base = f"{prefix}{{feedback}}:"
        self.own = Pages(window, max_bytes, events, clock)
        self.queue: collections.deque[Impression] = collections.deque()
        self.connected = True
        self._lock = threading.Lock()  # the copy and the queue
        self._write_lock = threading.Lock()  # one writer at a time: the thread or a flush
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._record = client.register_script(RECORD)
        self._feedback = client.register_script(FEEDBACK)
        self._thread = threading.Thread(target=self._run, name="feedback-writer", daemon=True)
        self._thread.start()

    def page_key(self, request_id: str) -> str:
        return f"{self.base}page:{request_id}"

    def tallies_key(self, experiment: str) -> str:
        return f"{self.base}tallies:{experiment}"

    # ---- the request paths' side ---------------------------------------------------------
    def record(self, impressions: Sequence[Impression]) -> None:
        counted: dict[str, int] = {}
        dropped = 0
        with self._lock:
            for impression in impressions:
                self.own.put(impression)
                self.queue.append(impression)
                counted[impression.experiment] = counted.get(impression.experiment, 0) + 1
            while len(self.queue) > QUEUE:
                self.queue.popleft()
                dropped += 1
        self._wake.set()
        for experiment, n in counted.items():
            self.events.impressions_recorded(experiment, n)
        if dropped:
            self.events.impressions_dropped("redis_backlog", dropped)

    # ---- feedback and results --------------------------------------------------------------
    def feedback(self, request_id: str, clicks: Sequence[str],
                 skips: Sequence[str] = ()) -> Taken:
        """The feedback credited in Redis; RedisError (counted, logged once per outage) when
        Redis cannot be reached: nothing was changed."""
        try:
            taken = self._credit(request_id, clicks, skips)
        except redis.RedisError as exc:
            self._failed(exc)
            raise
        self._reached()
        return taken

    def _credit(self, request_id: str, clicks: Sequence[str], skips: Sequence[str]) -> Taken:
        with self._lock:
            kept = self.own.get(request_id)
        create = "" if kept is None else encode(kept.impression)
        text = create or self.client.hget(self.page_key(request_id), "page")
        if text is None:
            raise not_found(request_id, self.window)
        for _ in range(3):  # another page under the id: computed again on Redis's
            impression = decode(request_id, text)
            outcome = attribute(impression, clicks, skips)
            ttl = max(1, int((self.window - (self.clock() - impression.at)) * 1000))
            status, other = self._feedback(
                keys=[self.page_key(request_id), self.tallies_key(impression.experiment)],
                args=[outcome or "", text, create, ttl])
            if status == "gone":
                raise not_found(request_id, self.window)
            if status == "ok":
                if outcome is not None:
                    self.events.outcome_recorded(impression.experiment, outcome)
                replaced: Outcome | None = other if other in OUTCOMES else None
                return Taken(request_id, impression.experiment, outcome, replaced)
            text, create = other, ""
        raise redis.ResponseError(f"the page under {request_id!r} kept changing")

    def counts(self, experiment: str) -> Counts | None:
        """The fleet's tallies; RedisError (counted, logged once per outage) without Redis."""
        try:
            raw = self.client.hgetall(self.tallies_key(experiment))
        except redis.RedisError as exc:
            self._failed(exc)
            raise
        self._reached()
        if not raw:
            return None
        return Counts(int(raw.get("impressions", 0)),
                      {o: int(raw.get(o, 0)) for o in OUTCOMES}, int(raw.get("feedback", 0)))

    # ---- the writer --------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every page waiting, now (RedisError when Redis cannot be reached)."""
        while self._write_batch():
            pass

    def close(self) -> None:
        """Stop the writer after one last try to write what waits."""
        self._stop.set()
        self._wake.set()
        self._thread.join(10)
        try:
            self.flush()
        except redis.RedisError as exc:
            self._failed(exc)

    def _run(self) -> None:
        backoff = BACKOFF[0]
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            self._stop.wait(FLUSH_SECONDS)  # gather a batch
            try:
                self.flush()
                backoff = BACKOFF[0]
            except redis.RedisError as exc:
                self._failed(exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF[1])
                self._wake.set()  # try again
            except Exception:  # a thread that died would leave every later page unwritten
                log.exception("feedback: a batch of pages could not be written to Redis and "
                              "was dropped (counted as sink_failed); the writer goes on")
                self.events.redis_error("feedback")
                self._stop.wait(1.0)
                self._wake.set()

    def _write_batch(self) -> bool:
        """One pipeline of waiting pages; whether any was taken. A batch that fails goes back
        to the front of the queue."""
        with self._write_lock:
            with self._lock:
                batch = [self.queue.popleft() for _ in range(min(BATCH, len(self.queue)))]
            if not batch:
                return False
            try:
                self._write(batch)
            except redis.RedisError:  # Redis away: the batch waits for it, first in line
                with self._lock:
                    self.queue.extendleft(reversed(batch))
                raise
            except Exception:  # not Redis's doing: sent again it would fail again, forever
                self.events.impressions_dropped("sink_failed", len(batch))
                raise
        self._reached()
        return True

    def _write(self, batch: list[Impression]) -> None:
        now = self.clock()
        pipe: Any = self.client.pipeline(transaction=False)
        experiments = f"{self.base}experiments"
        for impression in batch:
            ttl = int((self.window - (now - impression.at)) * 1000)
            if ttl <= 0:
                continue  # its window ended while it waited
            self._record(keys=[self.page_key(impression.request_id),
                               self.tallies_key(impression.experiment), experiments],
                         args=[encode(impression), ttl, impression.experiment], client=pipe)
        pipe.execute()

    def _reached(self) -> None:
        """Redis answered (logged once, after an outage)."""
        if not self.connected:
            log.warning("feedback: Redis answers again")
        self.connected = True

    def _failed(self, exc: redis.RedisError) -> None:
        """Counted always, logged once per outage."""
        if self.connected:
            log.warning("feedback: Redis unreachable, interleaved pages wait here (%d): %s",
                        len(self.queue), exc)
        self.connected = False
        self.events.redis_error("feedback")
