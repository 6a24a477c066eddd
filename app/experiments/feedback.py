"""Where interleaved pages wait for their feedback: the impression store.

A request path hands each interleaved page to `record` (an `ImpressionSink`); `POST
/v1/feedback` finds it by request id and credits its clicks (attribution.py); the results
read the tallies. Pages are kept for `window` seconds after they were served, and at most
`max_bytes` of them (the oldest go first, counted as dropped): a feedback after that is
answered 404.

`MemoryImpressions` keeps them in this process (no Redis); feedback_redis.py keeps them in
Redis, so that a feedback reaching any replica finds the page, with the tallies counted
fleet-wide. Both report through `FeedbackEvents`, which they own.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.errors import NotFound
from app.experiments.attribution import Counts, Outcome, Taken, attribute
from app.experiments.impressions import Impression

PAGE_BYTES = 200  # what a kept page costs besides its documents (a rough count, for the cap)
DOC_BYTES = 100  # and each of its documents, besides the id's length


class FeedbackEvents(Protocol):
    """What the impression stores report (app/observability/metrics.py implements it)."""

    def impressions_recorded(self, experiment: str, count: int) -> None:
        """`count` interleaved pages of `experiment` were recorded by this replica."""

    def outcome_recorded(self, experiment: str, outcome: str) -> None:
        """A feedback gave an impression of `experiment` this outcome (control, treatment,
        tie)."""

    def impressions_dropped(self, reason: str, count: int) -> None:
        """Pages dropped before their window ended: `capacity` (over the byte cap, oldest
        first), `redis_backlog` (Redis unreachable too long to write them), `sink_failed` (a
        batch Redis could not be sent, for a cause other than Redis: logged)."""

    def redis_error(self, op: str) -> None:
        """A Redis round trip failed; `op` is `feedback` here."""


class FeedbackStore(Protocol):
    """The impression store the services hold (embedded or Redis)."""

    window: float

    def record(self, impressions: Sequence[Impression]) -> None: ...

    def feedback(self, request_id: str, clicks: Sequence[str],
                 skips: Sequence[str] = ()) -> Taken: ...

    def counts(self, experiment: str) -> Counts | None: ...

    def close(self) -> None: ...


def page_bytes(impression: Impression) -> int:
    """The cost of one kept page, as the cap counts it."""
    return PAGE_BYTES + len(impression.request_id) + len(impression.unit) + sum(
        DOC_BYTES + len(doc) for doc, _ in impression.teams)


def not_found(request_id: str, window: float) -> NotFound:
    return NotFound("request_id", f"no interleaved page was served under {request_id!r} in "
                    f"the last {window:g} s (or it is no longer kept)")


@dataclass(slots=True)
class Kept:
    impression: Impression
    outcome: Outcome | None
    size: int


class Pages:
    """The pages of the last `window` seconds, at most `max_bytes` of them, by request id;
    not locked (the stores lock around it)."""

    def __init__(self, window: float, max_bytes: int, events: FeedbackEvents,
                 clock: Callable[[], float]) -> None:
        self.window, self.max_bytes, self.events, self.clock = window, max_bytes, events, clock
        self.held: OrderedDict[str, Kept] = OrderedDict()  # oldest first
        self.bytes = 0

    def put(self, impression: Impression) -> bool:
        """Keep `impression`; False when it is the very page already kept under its id."""
        old = self.held.pop(impression.request_id, None)
        if old is not None:
            self.bytes -= old.size
            if old.impression == impression:
                self.held[impression.request_id] = old
                self.bytes += old.size
                return False
        size = page_bytes(impression)
        self.held[impression.request_id] = Kept(impression, None, size)
        self.bytes += size
        self.expire()
        return True

    def get(self, request_id: str) -> Kept | None:
        kept = self.held.get(request_id)
        if kept is None or self.clock() - kept.impression.at > self.window:
            return None
        return kept

    def expire(self) -> None:
        """Drop what the window let go of, then the oldest past the cap."""
        horizon, dropped = self.clock() - self.window, 0
        while self.held:
            rid, first = next(iter(self.held.items()))
            over = self.bytes > self.max_bytes
            if first.impression.at >= horizon and not over:
                break
            del self.held[rid]
            self.bytes -= first.size
            dropped += first.impression.at >= horizon
        if dropped:
            self.events.impressions_dropped("capacity", dropped)


class MemoryImpressions:
    """Embedded: the pages and the tallies in this process (each process its own: with
    several processes or replicas, set REDIS_URL)."""

    def __init__(self, window: float, max_bytes: int, events: FeedbackEvents,
                 clock: Callable[[], float] = time.time) -> None:
        self.window = window
        self.events = events
        self.pages = Pages(window, max_bytes, events, clock)
        self.tallies: dict[str, Counts] = {}
        self._lock = threading.Lock()

    def record(self, impressions: Sequence[Impression]) -> None:
        counted: dict[str, int] = {}
        with self._lock:
            for impression in impressions:
                if not self.pages.put(impression):
                    continue  # the same page twice is one impression
                tally = self.tallies.setdefault(impression.experiment, Counts())
                tally.impressions += 1
                counted[impression.experiment] = counted.get(impression.experiment, 0) + 1
        for experiment, n in counted.items():
            self.events.impressions_recorded(experiment, n)

    def feedback(self, request_id: str, clicks: Sequence[str],
                 skips: Sequence[str] = ()) -> Taken:
        with self._lock:
            kept = self.pages.get(request_id)
            if kept is None:
                raise not_found(request_id, self.window)
            outcome = attribute(kept.impression, clicks, skips)
            previous, kept.outcome = kept.outcome, outcome
            experiment = kept.impression.experiment
            self.tallies.setdefault(experiment, Counts()).change(previous, outcome)
        if outcome is not None:
            self.events.outcome_recorded(experiment, outcome)
        return Taken(request_id, experiment, outcome, previous)

    def counts(self, experiment: str) -> Counts | None:
        with self._lock:
            tally = self.tallies.get(experiment)
            return None if tally is None else Counts(tally.impressions, dict(tally.outcomes),
                                                     tally.feedback)

    def close(self) -> None:
        """Nothing to flush: the pages live and die with the process."""
