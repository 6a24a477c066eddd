"""The request path: one call into the Rust engine per request, then the log and the audit.

The engine (app._engine.Engine, built from the config in use) decodes the body, routes it,
assigns experiments, runs the pipeline, counts the metrics and writes the response and the
audit line; this module hands it what only the control plane has (the banlist indexes, the
time budget, the QA override) and writes what it returns to the logs.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio.to_thread

from app.banlist.base import BanStore
from app.config.settings import Settings
from app.config.versions import ConfigHolder
from app.engine.executor import RuleExecutor
from app.experiments.impressions import ImpressionSink, from_engine, hand_on
from app.observability.audit import AuditLog
from app.observability.logs import OneLineRecords
from app.replay.capture import Capture

FORCE_HEADER = "X-Rearrange-Force-Variant"  # QA: `experiment=variant[, ...]`, admin token only
EXPLAIN_HEADER = "X-Rearrange-Explain"  # QA: `true` adds `explain`, any admin token
log = logging.getLogger("rearrange.rules")
log.addFilter(OneLineRecords())  # a rule's exception text escaped, under any handler
Answer = tuple[int, bytes]  # (status, JSON body)


class FailureLog:
    """One log line per (rule, phase) per `interval` seconds, with the cause and how many
    failures the quiet time held: a rule failing on every request must not flood the log."""

    def __init__(self, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # → (logged at, held back)
        self._lock = threading.Lock()

    def failed(self, rule: str, phase: str, problem: str, closed: bool, profile: str,
               cause: BaseException | None = None) -> None:
        """Log this failure (with the traceback of `cause`, the exception a Python rule
        raised, if any), or count it until the rule's next line is due."""
        key, now = (rule, phase), self.clock()
        with self._lock:
            logged, held = self._last.get(key, (None, 0))
            if logged is not None and now - logged < self.interval:
                self._last[key] = (logged, held + 1)
                return
            self._last[key] = (now, 0)
        since = f" ({held} more since the last line)" if held else ""
        log.error("rule %s in %s (profile %s) failed, %s: %s%s", rule, phase, profile,
                  "request answered 503" if closed else "page served without it", problem,
                  since, exc_info=cause)


class Rearranger:
    """Serves /v1/rerank (and `rearrange run`); holds what a request reads, no state of its
    own: the settings (limits, deadline), the lists matched, the config served, where the
    Python rules run and what it writes to (the audit log, the capture, the failure log)."""

    def __init__(self, settings: Settings, banlist: BanStore, quarantine: BanStore | None,
                 config: ConfigHolder, executor: RuleExecutor, *,
                 impressions: ImpressionSink,
                 audit_log: AuditLog | None = None, capture: Capture | None = None,
                 failures: FailureLog | None = None,
                 clock: Callable[[], float] | None = None,
                 impressions_dropped: Callable[[int], None] = lambda n: None) -> None:
        self.settings = settings
        # Arrival and the deadline are read on this clock (monotonic seconds): by default
        # `time.perf_counter` here and the engine's own monotonic clock (the same one, which
        # its rule timings use); a clock given (a test's) is read for both.
        self.clock = clock or time.perf_counter
        self._engine_clock = clock
        self.store = banlist
        self.quarantine = quarantine
        self.config = config
        self.audit_log = audit_log
        self.failures = failures or FailureLog()
        self.capture = capture  # with REARRANGE_CAPTURE_PATH
        # Python rules run on its threads, each within its time (app/engine/executor.py)
        self.executor = executor
        # interleaved pages served, for POST /v1/feedback; a failing sink's are counted here
        self.impressions = impressions
        self.impressions_dropped = impressions_dropped

    async def serve(self, body: bytes | bytearray, forced: Mapping[str, str] | None = None,
                    forced_by: str | None = None, arrived: float | None = None,
                    explain: bool = False) -> Answer:
        """`rerank` for a caller on the event loop: answered on it, unless the request's
        profile has a Python rule; then in a thread, so that the loop (other requests,
        /healthz, /metrics) never waits for a rule while the request waits for its own."""
        answered = self._rerank(body, forced, forced_by, arrived, explain, defer=True)
        if answered is None:
            answered = await anyio.to_thread.run_sync(functools.partial(
                self._rerank, body, forced, forced_by, arrived, explain))
            assert answered is not None, "answered when not deferred"
        return answered

    def rerank(self, body: bytes | bytearray, forced: Mapping[str, str] | None = None,
               forced_by: str | None = None, arrived: float | None = None,
               explain: bool = False, candidate: Any = None) -> Answer:
        """(status, JSON body) for one request body: 200 with the page, 4xx naming the field
        of bad input, 503 when a closed rule failed (CONTRACT "When a rule fails").

        `forced` (experiment → variant, from the QA header, the caller having checked the
        admin token of `forced_by`) overrides the bucketing for this request only.
        `explain` (the caller having checked an admin token) adds the response's `explain`:
        every step with what it did or why it did not run, and the page after it.
        `candidate` (an `app.config.load.Engine` not served, POST /v1/admin/config/try) runs the
        body through it instead: not audit-logged, its failures not logged (its response
        says them), counted only in the candidate's own engine metrics.
        """
        answered = self._rerank(body, forced, forced_by, arrived, explain, candidate)
        assert answered is not None, "answered when not deferred"
        return answered

    def _rerank(self, body: bytes | bytearray, forced: Mapping[str, str] | None,
                forced_by: str | None, arrived: float | None, explain: bool,
                candidate: Any = None, defer: bool = False) -> Answer | None:
        """`rerank`; None, with `defer`, for a request whose profile has a Python rule."""
        clock = self.clock
        started = clock() if arrived is None else arrived
        settings = self.settings
        # One reference for the whole request, even across a reload.
        engine = self.config.engine if candidate is None else candidate
        # The engine matches one snapshot of each index and reports the version published
        # inside it, whatever batch a replica thread applies meanwhile.
        banlist = self.store.index
        quarantine = self.quarantine.index if self.quarantine is not None else None
        now = clock()
        budget = (started + settings.deadline_ms / 1000 - now) if settings.deadline_ms else None
        answered = engine.core.rerank(
            body, banlist=banlist, quarantine=quarantine, now=time.time(),
            budget_seconds=budget, forced=forced, forced_by=forced_by,
            max_documents=settings.max_documents, max_text_chars=settings.max_text_chars,
            elapsed=now - started, clock=self._engine_clock,
            audit_line=self.audit_log is not None and candidate is None, explain=explain,
            executor=self.executor, defer_python=defer)
        if answered is None:
            return None
        status, out, line, failures, impression = answered
        if candidate is not None:
            return status, out  # no log, no impression: a candidate serves nobody
        for rule, phase, problem, closed, profile, cause in failures:
            self.failures.failed(rule, phase, problem, closed, profile, cause)
        if line is not None and self.audit_log is not None:
            # Every exposure is logged, not only requests that changed something: analysts
            # join on what was served instead of recomputing buckets. A skipped rule is
            # logged too: the page served is not what the profile says it would be.
            self.audit_log.emit_line(line)
        if impression is not None:
            hand_on(self.impressions, [from_engine(impression)], self.impressions_dropped)
        if self.capture is not None and forced is None and status in (200, 503):
            # QA traffic (forced variants) is not real traffic; 4xx bodies replay as 4xx
            # the version as of now: at most the batches applied since the match later
            self.capture.offer(body, status, engine.version, banlist.version)
        return status, out
