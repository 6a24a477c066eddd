"""The Python rule executor on its own (app/engine/executor.py): results and exceptions
come back, a call past its time raises RuleTimeout, a spinning call is interrupted and a
blocked one abandoned and replaced, up to the cap. Real threads, short graces."""
from __future__ import annotations

import threading
import time

import pytest

from app._engine import RuleTimeout
from app.engine.executor import Limits, RuleExecutor, RuleInterrupted

GRACE = 0.05


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def rule_event(self, rule: str, event: str) -> None:
        self.seen.append((rule, event))


def executor(**limits) -> tuple[RuleExecutor, Events]:
    events = Events()
    return RuleExecutor(Limits(**{"grace": GRACE, **limits}), events), events


def wait_for(check, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.01)


def test_a_call_returns_what_the_rule_returns_or_raises_what_it_raises():
    ex, events = executor()
    assert ex.call("add", lambda a, b: a + b, (2, 3), 1.0) == 5
    with pytest.raises(KeyError, match="gone"):
        ex.call("raises", lambda: {}["gone"], (), 1.0)
    caller = threading.get_ident()
    assert ex.call("where", threading.get_ident, (), 1.0) != caller  # on its own thread
    assert events.seen == [] and ex.state()["threads"] == 1  # one thread did all three
    ex.close()


def test_a_call_past_its_time_raises_and_a_spinning_one_is_interrupted():
    ex, events = executor()
    stopped = threading.Event()

    def spin():
        try:
            while True:
                pass
        except RuleInterrupted:
            stopped.set()
            raise

    started = time.monotonic()
    with pytest.raises(RuleTimeout, match="spin did not return within 20 ms"):
        ex.call("spin", spin, (), 0.02)
    assert time.monotonic() - started < 1.0
    assert stopped.wait(5), "the spinner was never interrupted"
    wait_for(lambda: ex.state()["busy"] == 0)
    assert events.seen == [("spin", "timeout"), ("spin", "interrupted")]
    assert ex.call("after", lambda: "ok", (), 1.0) == "ok"  # the thread serves again


def test_a_blocked_call_is_abandoned_and_replaced_up_to_the_cap():
    ex, events = executor(workers=2, abandoned_max=1)
    release = threading.Event()
    for _ in range(2):  # blocked in C: an interruption waits for it
        with pytest.raises(RuleTimeout):
            ex.call("blocked", release.wait, (), 0.01)
    wait_for(lambda: ex.state()["abandoned"] == 1)
    time.sleep(4 * GRACE)  # the second one would be abandoned by now, but for the cap
    state = ex.state()
    assert state["at_cap"] and state["busy"] == 1 and state["threads"] == 1
    assert events.seen.count(("blocked", "abandoned")) == 1
    assert ex.call("meanwhile", lambda: 1, (), 1.0) == 1  # on the abandoned one's successor
    release.set()  # both come back: the abandoned thread ends, the other serves again
    wait_for(lambda: ex.state()["abandoned"] == 0 and ex.state()["busy"] == 0)
    assert not ex.state()["at_cap"]
    ex.close()


def test_a_call_that_waited_past_its_time_never_runs():
    ex, _ = executor(workers=1)
    release, ran = threading.Event(), threading.Event()
    with pytest.raises(RuleTimeout):
        ex.call("blocked", release.wait, (), 0.01)
    with pytest.raises(RuleTimeout):  # the one thread is busy: it waits its turn, in vain
        ex.call("queued", ran.set, (), 0.01)
    release.set()
    wait_for(lambda: ex.state()["busy"] == 0)
    assert ex.call("after", lambda: 2, (), 1.0) == 2 and not ran.is_set()
    ex.close()


def test_no_time_given_is_the_limits_timeout():
    ex, events = executor(timeout=0.02, grace=1.0)
    with pytest.raises(RuleTimeout, match="within 20 ms"):
        ex.call("sleeps", time.sleep, (0.05,), None)
    wait_for(lambda: ex.state()["busy"] == 0)  # back within its grace: nothing more to do
    assert events.seen == [("sleeps", "timeout")]
    ex.close()
