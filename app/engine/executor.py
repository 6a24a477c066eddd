"""Where Python rules run: a few daemon threads of our own, so that no rule holds a request
past its time, or the worker past its life.

The engine (crates/engine/src/rules/python.rs) hands each Python rule call to
`RuleExecutor.call` with the time the rule has, and waits; the wait releases the GIL, as
any lock wait does. A call that has not returned by then raises `RuleTimeout` in the
caller, which answers the request as the step's `on_error` says, and the call is left to
the watchdog: still running `grace` seconds later, an exception (`RuleInterrupted`) is
raised in its thread at its next bytecode, which stops a pure-Python loop; still running
`grace` seconds after that (blocked in C: a sleep, a read), its thread is abandoned and
another takes its place, up to `abandoned_max` abandoned threads. An abandoned thread that
comes back ends. Daemon threads: a stuck one never holds up the process's exit (the pool of
concurrent.futures joins its workers at exit). docs/config.md#python-rules has the model.

The call interface is plain Python (`call(rule, fn, args, timeout)`), so a request path
that is not Python's own can use it too.
"""
from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app._engine import RuleTimeout

log = logging.getLogger("rearrange.rules")

# What rule_event reports: the caller gave up on a call (timeout), the watchdog raised
# RuleInterrupted in its thread (interrupted), or gave its thread up (abandoned).
EVENTS = ("timeout", "interrupted", "abandoned")


class RuleInterrupted(BaseException):
    """Raised in the thread of a Python rule that ran past its time and its grace.

    A BaseException, as KeyboardInterrupt is: a rule's `except Exception` does not catch it.
    """


class RuleEvents(Protocol):
    """What the executor reports as it works (the service's Metrics implement it)."""

    def rule_event(self, rule: str, event: str) -> None:
        """One of EVENTS happened to a call of `rule`."""


class NoRuleEvents:
    """Nobody listens."""

    def rule_event(self, rule: str, event: str) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Limits:
    """The executor's limits, in seconds and threads (docs/config.md#python-rules)."""

    workers: int = 4  # threads running rules at once; more calls wait their turn
    timeout: float = 1.0  # a call's time when its caller gives none
    grace: float = 1.0  # past its time, then again past the interruption
    abandoned_max: int = 8  # stuck threads given up and replaced, at most, at once


class _Call:
    """One rule call, from its submission to its result."""

    __slots__ = ("rule", "fn", "args", "done", "value", "error", "worker", "given_up_at",
                 "interrupted_at")

    def __init__(self, rule: str, fn: Callable[..., Any], args: Sequence[Any]) -> None:
        self.rule, self.fn, self.args = rule, fn, args
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.worker: _Worker | None = None  # set when a thread takes it
        self.given_up_at: float | None = None  # the caller's timeout
        self.interrupted_at: float | None = None


class _Worker:
    """A thread of the executor and the call it runs."""

    __slots__ = ("thread", "call", "abandoned")

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.call: _Call | None = None
        self.abandoned = False


def _raise_in(thread: threading.Thread, exc: type[BaseException] | None) -> None:
    """Raise `exc` in `thread` at its next bytecode (None: cancel one not raised yet)."""
    ident = thread.ident
    if ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                                   None if exc is None else ctypes.py_object(exc))


class RuleExecutor:
    """Runs Python rule calls on its threads, each within its time (module docstring)."""

    def __init__(self, limits: Limits | None = None, events: RuleEvents | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or Limits()
        self.events: RuleEvents = events or NoRuleEvents()
        self.clock = clock
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)  # a call queued, or closing
        self._wake = threading.Condition(self._lock)  # the watchdog: a call given up
        self._queue: deque[_Call] = deque()
        self._workers: list[_Worker] = []
        self._idle = 0
        self._abandoned: list[_Worker] = []
        self._overdue: list[_Call] = []  # given up while running
        self._watchdog: threading.Thread | None = None
        self._closed = False

    def call(self, rule: str, fn: Callable[..., Any], args: Sequence[Any],
             timeout: float | None) -> Any:
        """`fn(*args)` on one of the executor's threads: what it returns, or what it
        raises, raised here; RuleTimeout once `timeout` seconds have passed (None: the
        limits' timeout) without an answer. `rule` names the call in the log and events."""
        seconds = self.limits.timeout if timeout is None else max(0.0, timeout)
        call = _Call(rule, fn, args)
        with self._lock:
            self._queue.append(call)
            self._staff()
            self._ready.notify()
        if not call.done.wait(seconds):
            with self._lock:
                late = not call.done.is_set()
                if late:
                    self._give_up(call)
            if late:
                self.expired(rule)
                raise RuleTimeout(f"{rule} did not return within {seconds * 1000:.0f} ms")
        if call.error is not None:
            raise call.error
        return call.value

    def expired(self, rule: str) -> None:
        """A call of `rule` past its time: given up by `call`, or not made at all because
        its request had no time left for it (the engine's check, before `call`). Either way
        the request goes on without the rule, and this is the one place it is counted."""
        self.events.rule_event(rule, "timeout")

    def state(self) -> dict[str, Any]:
        """Threads running rules, busy ones, calls waiting, abandoned threads and their
        cap; `at_cap` when no more stuck threads can be replaced (/readyz, the gauges)."""
        with self._lock:
            abandoned = len(self._abandoned)
            return {"threads": len(self._workers),
                    "busy": sum(w.call is not None for w in self._workers),
                    "queued": len(self._queue), "abandoned": abandoned,
                    "abandoned_max": self.limits.abandoned_max,
                    "at_cap": abandoned >= self.limits.abandoned_max}

    def close(self) -> None:
        """Idle threads end; busy ones end after their call (none is waited for)."""
        with self._lock:
            self._closed = True
            self._ready.notify_all()
            self._wake.notify_all()

    # ---- under the lock ----------------------------------------------------------------
    def _staff(self) -> None:
        """Start a thread when the queue outnumbers the idle ones and the limit allows."""
        if len(self._queue) > self._idle and len(self._workers) < self.limits.workers:
            worker = _Worker()
            worker.thread = threading.Thread(target=self._work, args=(worker,), daemon=True,
                                             name="rearrange-rule")
            self._workers.append(worker)
            worker.thread.start()

    def _give_up(self, call: _Call) -> None:
        call.given_up_at = self.clock()
        if call.worker is None:  # still queued: it will never run
            self._queue.remove(call)
            return
        self._overdue.append(call)
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                              name="rearrange-rule-watchdog")
            self._watchdog.start()
        self._wake.notify()

    # ---- a worker thread ---------------------------------------------------------------
    def _work(self, worker: _Worker) -> None:
        while True:
            call = self._take(worker)
            if call is None:
                return
            try:
                value, error = call.fn(*call.args), None
            except BaseException as exc:  # the rule's, RuleInterrupted included: its caller's
                value, error = None, exc
            while True:  # an interruption arriving now is the call's, not ours
                try:
                    if self._finish(worker, call, value, error):
                        return
                    break
                except RuleInterrupted:
                    continue

    def _take(self, worker: _Worker) -> _Call | None:
        with self._lock:
            while not self._queue:
                if self._closed:
                    self._workers.remove(worker)
                    return None
                self._idle += 1
                try:
                    self._ready.wait()
                finally:
                    self._idle -= 1
            call = self._queue.popleft()
            call.worker, worker.call = worker, call
            return call

    def _finish(self, worker: _Worker, call: _Call, value: Any,
                error: BaseException | None) -> bool:
        """Hand the result over; True when this thread was abandoned (it ends now)."""
        with self._lock:
            worker.call = None
            if call.interrupted_at is not None and worker.thread is not None:
                _raise_in(worker.thread, None)  # one not raised yet must not hit the next call
            call.value, call.error = value, error
            call.done.set()
            if call in self._overdue:
                self._overdue.remove(call)
            if worker.abandoned:
                self._abandoned.remove(worker)
                return True
            return False

    # ---- the watchdog ------------------------------------------------------------------
    def _watch(self) -> None:
        grace = self.limits.grace
        while True:
            acts: list[tuple[str, _Call]] = []
            with self._lock:
                if self._closed and not self._overdue:
                    return
                now, wait = self.clock(), None
                for call in list(self._overdue):
                    since = call.interrupted_at or call.given_up_at or now
                    due = since + grace
                    if now < due:
                        wait = due - now if wait is None else min(wait, due - now)
                    elif call.interrupted_at is None:
                        self._interrupt(call, now)
                        acts.append(("interrupted", call))
                        wait = grace if wait is None else min(wait, grace)
                    elif self._abandon(call):
                        acts.append(("abandoned", call))
                    else:  # at the cap: try again when a grace has passed
                        wait = grace if wait is None else min(wait, grace)
                if not acts:
                    self._wake.wait(wait)
            for event, call in acts:
                self.events.rule_event(call.rule, event)
                if event == "interrupted":
                    log.warning("python rule %s still ran %.0f ms after its timeout: "
                                "interrupted (RuleInterrupted raised in its thread)",
                                call.rule, grace * 1000)
                else:
                    log.error("python rule %s still ran %.0f ms after it was interrupted "
                              "(blocked outside Python): its thread is abandoned and "
                              "replaced (%d abandoned of at most %d)", call.rule,
                              grace * 1000, len(self._abandoned), self.limits.abandoned_max)

    def _interrupt(self, call: _Call, now: float) -> None:
        call.interrupted_at = now
        worker = call.worker
        if worker is not None and worker.call is call and worker.thread is not None:
            _raise_in(worker.thread, RuleInterrupted)

    def _abandon(self, call: _Call) -> bool:
        """Give up the thread of `call` and let another take its place; False at the cap."""
        worker = call.worker
        if worker is None or len(self._abandoned) >= self.limits.abandoned_max:
            return False
        worker.abandoned = True
        self._workers.remove(worker)
        self._abandoned.append(worker)
        self._overdue.remove(call)
        self._staff()
        return True
