"""The sanction state machine, with the seed 002 §16.2 lab: hysteresis, FP/FN, pins."""
from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from app.sanctions.machine import (
    BANNED,
    CLEAN,
    QUARANTINE,
    HostState,
    Observation,
    Thresholds,
    clear,
    is_stale,
    next_state,
    observe,
)

T = Thresholds()  # ban > 0.9 until < 0.6; quarantine > 0.7 until < 0.5


def next_state_without_hysteresis(score: float, t: Thresholds) -> str:
    """One threshold per sanction, as a naive system would do (the baseline the
    hysteresis is measured against)."""
    if score > t.ban_enter:
        return BANNED
    return QUARANTINE if score > t.quarantine_enter else CLEAN


def run(scores, with_hysteresis=True):
    state, states = CLEAN, []
    for s in scores:
        state = next_state(state, s, T) if with_hysteresis else next_state_without_hysteresis(
            s, T)
        states.append(state)
    return states


def flips(states):
    return sum(1 for a, b in zip(states, states[1:], strict=False) if a != b)


@pytest.mark.parametrize("scores", [
    [0.91, 0.88, 0.93, 0.87, 0.92],  # jitter around the ban threshold
    [0.72, 0.68, 0.74, 0.66, 0.71],  # jitter around the quarantine threshold
])
def test_five_epochs_flap_without_hysteresis_and_hold_with_it(scores):
    naive, stable = run(scores, False), run(scores, True)
    assert flips(naive) == 4  # the page changes on every update
    assert flips(stable) == 0  # entered once, held
    assert stable[0] == naive[0]


def test_leaving_needs_the_exit_threshold():
    assert run([0.95, 0.61, 0.59, 0.49]) == [BANNED, BANNED, QUARANTINE, CLEAN]
    assert run([0.95, 0.3]) == [BANNED, CLEAN]
    assert run([0.75, 0.55, 0.95]) == [QUARANTINE, QUARANTINE, BANNED]


def test_fp_fn_of_two_ban_thresholds_on_a_labelled_set():
    # (score, is_spam): a hand-labelled set; the counts below are counted by hand.
    labelled = [(0.97, True), (0.93, True), (0.91, False), (0.88, True), (0.86, False),
                (0.83, True), (0.78, False), (0.74, True), (0.40, False), (0.20, False)]

    def errors(ban_enter):
        t = Thresholds(ban_enter=ban_enter, ban_exit=min(0.6, ban_enter - 0.1),
                       quarantine_enter=min(0.7, ban_enter), quarantine_exit=0.5)
        banned = [next_state(CLEAN, s, t) == BANNED for s, _ in labelled]
        fp = sum(b and not spam for b, (_, spam) in zip(banned, labelled, strict=True))
        fn = sum(spam and not b for b, (_, spam) in zip(banned, labelled, strict=True))
        return fp, fn

    assert errors(0.9) == (1, 3)  # strict: one honest site banned, three spammers missed
    assert errors(0.8) == (2, 1)  # lax: two honest sites banned, one spammer missed


def test_thresholds_must_have_hysteresis():
    with pytest.raises(ValidationError, match="ban_exit must be below ban_enter"):
        Thresholds(ban_enter=0.6, ban_exit=0.6)
    with pytest.raises(ValidationError, match="quarantine_enter must not be above"):
        Thresholds(quarantine_enter=0.95)


def test_observe_records_history_and_pins_hold_clean():
    host = HostState("spam.example")
    host, move = observe(host, Observation("spam.example", "host", 0.95, 10.0), T, 100.0,
                         "antispam")
    assert host.state == BANNED and move.to_state == BANNED and "0.95" in move.reason
    host, move = clear(host, 200.0, 1000.0, "appeals", "site cleaned up")
    assert host.state == CLEAN and host.pinned(999.0) and not host.pinned(1000.0)
    host, move = observe(host, Observation("spam.example", "host", 0.99, 20.0), T, 500.0,
                         "antispam")
    assert host.state == CLEAN and move is None and host.score == 0.99  # pinned: no re-ban
    host, move = observe(host, Observation("spam.example", "host", 0.99, 30.0), T, 1000.0,
                         "antispam")
    assert host.state == BANNED  # the pin ended
    assert [m.to_state for m in host.history] == [BANNED, CLEAN, BANNED]
    forever, _ = clear(host, 1.0, math.inf, "appeals", "verified business")
    assert forever.pinned(1e12)


def test_out_of_order_observations_are_stale():
    host = HostState("a.example", observed_at=50.0)
    assert is_stale(host, Observation("a.example", "host", 0.1, 49.0))
    assert not is_stale(host, Observation("a.example", "host", 0.1, 50.0))
    assert not is_stale(HostState("b"), Observation("b", "host", 0.1, 0.0))
