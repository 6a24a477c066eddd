"""The always-valid test (app/experiments/sequential.py) against exact computations written
out here, and its error rate under continuous peeking, exactly and by simulation."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from app.experiments.sequential import (
    ALPHA,
    PRIOR,
    confidence_sequence,
    decide,
    log_e_value,
    read,
)


def e_exact(w: int, l: int, a: int) -> Fraction:  # noqa: E741 (l: losses, as the papers write)
    """2^n ∫ p^w (1-p)^l dBeta(a, a): with integer a the Beta functions are factorials,
    B(x, y) = (x-1)!(y-1)!/(x+y-1)!."""
    f = math.factorial

    def beta(x: int, y: int) -> Fraction:
        return Fraction(f(x - 1) * f(y - 1), f(x + y - 1))

    return 2 ** (w + l) * beta(a + w, a + l) / beta(a, a)


def log_e_lgamma(w: int, l: int, a: float) -> float:  # noqa: E741
    """The same from log-Gamma, written out without the module's helpers."""
    lg = math.lgamma
    return (lg(a + w) + lg(a + l) - lg(2 * a + w + l)) - (2 * lg(a) - lg(2 * a)) \
        + (w + l) * math.log(2)


@pytest.mark.parametrize("a", [1, 2, 10, 50])
@pytest.mark.parametrize(("w", "l"), [(0, 0), (1, 0), (0, 3), (7, 3), (30, 12), (120, 80),
                                      (400, 330), (5, 5)])
def test_e_value_is_the_mixture(a, w, l):  # noqa: E741
    exact = e_exact(w, l, a)
    assert log_e_value(w, l, a) == pytest.approx(math.log(exact), abs=1e-9)
    assert log_e_value(w, l, a) == pytest.approx(log_e_lgamma(w, l, a), abs=1e-9)


@pytest.mark.parametrize("a", [1, 3, 50])
def test_a_martingale_under_h0(a):
    # E[E_{n+1} | W, L] = E_n when each outcome is a fair coin: exactly, in fractions
    for w in range(0, 12):
        for l in range(0, 12):  # noqa: E741
            step = (e_exact(w + 1, l, a) + e_exact(w, l + 1, a)) / 2
            assert step == e_exact(w, l, a)


def test_a_tie_never_decides():
    for n in range(0, 3000, 7):
        assert log_e_value(n, n) <= 1e-12
        assert decide(n, n) == "continue"


def test_the_decision_takes_the_side_with_more_wins():
    threshold = math.log(1 / ALPHA)
    for w, l in [(400, 300), (300, 400), (60, 20), (20, 60), (101, 99)]:  # noqa: E741
        crossed = log_e_lgamma(w, l, PRIOR) >= threshold
        expected = ("treatment" if w > l else "control") if crossed else "continue"
        assert decide(w, l) == expected
    assert decide(400, 300) == "treatment" and decide(300, 400) == "control"
    assert decide(101, 99) == "continue"


def exact_false_decision_rate(horizon: int, a: float, alpha: float) -> float:
    """P(the test decides at some n <= horizon) under H0, peeking after every outcome:
    the probability mass of (W, L) paths, absorbed when they cross 1/alpha (exact DP)."""
    threshold = math.log(1 / alpha)
    alive = {0: 1.0}  # W -> probability of reaching (W, n - W) without deciding
    stopped = 0.0
    for n in range(1, horizon + 1):
        nxt: dict[int, float] = {}
        for w, mass in alive.items():
            for w2 in (w + 1, w):
                nxt[w2] = nxt.get(w2, 0.0) + mass / 2
        alive = {}
        for w, mass in nxt.items():
            if log_e_lgamma(w, n - w, a) >= threshold:
                stopped += mass
            else:
                alive[w] = mass
    return stopped


@pytest.mark.parametrize("a", [1.0, PRIOR])
def test_ville_exactly_for_every_peek(a):
    # every impression read, 3000 decisive outcomes: the chance of any decision stays <= alpha
    rate = exact_false_decision_rate(3000, a, ALPHA)
    assert 0 < rate <= ALPHA
    # and the test is not vacuous: at alpha = 0.5 it does decide, within that bound too
    assert 0.05 < exact_false_decision_rate(400, a, 0.5) <= 0.5


def simulate(seed: int, share: float, impressions: int, tie: float = 0.1, none: float = 0.5,
             intervals: bool = False) -> tuple[str, int, list[tuple[float, float]]]:
    """One experiment: each impression has no click (`none`), a tie, or a winner (treatment
    with probability `share`); the test read after every impression. The first decision
    and when, and every confidence sequence read."""
    rng = random.Random(seed)
    w = l = 0  # noqa: E741
    read_ = []
    for n in range(1, impressions + 1):
        u = rng.random()
        if u < none or u < none + tie:
            continue
        if rng.random() < share:
            w += 1
        else:
            l += 1  # noqa: E741
        if intervals:
            read_.append(confidence_sequence(w, l))
        decision = decide(w, l)
        if decision != "continue":
            return decision, n, read_
    return "continue", impressions, read_


def test_a_a_false_decisions_over_seeds_stay_under_alpha():
    seeds = 1000
    false = sum(simulate(seed, 0.5, 2500)[0] != "continue" for seed in range(seeds))
    assert false / seeds <= ALPHA


def test_a_known_preference_is_decided_with_its_sign():
    for seed in range(20):
        assert simulate(seed, 0.62, 6000)[0] == "treatment"
        assert simulate(seed, 0.38, 6000)[0] == "control"


def test_the_confidence_sequence_covers_the_true_share_at_every_read():
    share, seeds = 0.56, 120
    missed = 0
    for seed in range(seeds):
        _, _, intervals = simulate(1000 + seed, share, 1500, intervals=True)
        missed += any(not lo <= share <= hi for lo, hi in intervals)
    assert missed / seeds <= ALPHA


@pytest.mark.parametrize(("w", "l"), [(0, 0), (0, 9), (9, 0), (40, 25), (25, 40), (300, 250),
                                      (700, 600), (3, 1)])
def test_the_confidence_sequence_is_the_tests_inversion(w, l):  # noqa: E741
    lo, hi = confidence_sequence(w, l)
    n = w + l
    if n:
        assert lo <= w / n <= hi
    # 1/2 is outside exactly when the test decides
    assert (lo <= 0.5 <= hi) == (decide(w, l) == "continue")
    # at an inner end, the mixture against p is 1/alpha: written out from lgamma
    for p in (lo, hi):
        if 0 < p < 1:
            log_ratio = log_e_lgamma(w, l, PRIOR) - n * math.log(2) \
                - (w * math.log(p) + l * math.log1p(-p))
            assert log_ratio == pytest.approx(math.log(1 / ALPHA), abs=1e-6)


def test_reading_as_the_results_give_it():
    reading = read(60, 20)
    doc = reading.as_dict()
    assert doc["decision"] == "treatment" and doc["alpha"] == ALPHA
    assert doc["e_value"] == pytest.approx(math.exp(log_e_lgamma(60, 20, PRIOR)))
    assert doc["preference"] == 0.75
    assert read(0, 0).as_dict()["preference"] is None
    assert read(0, 0).as_dict()["confidence_sequence"] == [0.0, 1.0]
    with pytest.raises(ValueError):
        read(-1, 0)
