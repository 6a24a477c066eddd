"""The always-valid test of an interleaved experiment: a mixture sequential probability
ratio test (mSPRT) on its wins, safe to read after every impression.

Each impression that got a decisive outcome is a coin toss: treatment won it (its team
got more clicks) or control did; ties and impressions without clicks are set aside. Under
H0 (no preference) the share p of treatment's wins is 1/2. The test's statistic is the
mixture likelihood ratio

    E_n = ∫ p^W (1 − p)^L dπ(p) / (1/2)^n = 2^n · B(a + W, a + L) / B(a, a),

with W treatment's wins, L control's, n = W + L and π = Beta(a, a). Under H0, E_n is a
nonnegative martingale with E_0 = 1, so Ville's inequality gives
P(sup_n E_n ≥ 1/α) ≤ α: however often the result is read, and whenever the reader
stops, H0 is rejected with probability at most α. The decision is `treatment` or `control`
(the side with more wins) once E_n ≥ 1/α, else `continue`. The mixture is symmetric, so
one test covers both directions at α in all (two-sided); at W = L, E_n ≤ 1 (p^W(1−p)^W is
at most 4^−W), so a tie never decides.

The prior. Beta(a, a) puts its weight where the preferences of ranking changes are: its
standard deviation is 1 / (2·√(2a + 1)), 0.11 at a = PRIOR = 10, so shares of wins from
about 40/60 to 60/40 weigh most. The test is valid for any a; a only moves its power
(`python -m bench.interleaving --priors`, median decisive outcomes to a decision over 101
seeds): at a 55/45 preference a = 10 needs about 580, the uniform prior (a = 1) about 820
(its mass is spent on 80/20 preferences that do not occur), a = 50 about 640; a = 50
would save a tenth at 52/48 but cost half again at 70/30. At a = 10 no size of effect
costs much more than the best prior for it.

The same mixture, divided by p^W(1 − p)^L instead of 2^−n, is a martingale under any true
share p, so {p : that ratio < 1/α} is a confidence sequence for p: it covers the true p at
every n at once with probability at least 1 − α, and it holds 1/2 exactly while the test
says `continue`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

ALPHA = 0.05  # the chance of any false decision, however often the results are read
PRIOR = 10.0  # a of the Beta(a, a) mixture over treatment's share of wins
_STEPS = 64  # bisection steps of the confidence sequence's ends (2^-64: below a float's step)

Decision = Literal["treatment", "control", "continue"]


def log_beta(a: float, b: float) -> float:
    """log B(a, b) = log Γ(a) + log Γ(b) − log Γ(a + b)."""
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def log_mixture(wins: int, losses: int, prior: float = PRIOR) -> float:
    """log ∫ p^wins (1 − p)^losses dBeta(prior, prior)(p)."""
    return log_beta(prior + wins, prior + losses) - log_beta(prior, prior)


def log_e_value(wins: int, losses: int, prior: float = PRIOR) -> float:
    """log E_n: the mixture's likelihood ratio against p = 1/2 after `wins` of treatment
    and `losses` (wins of control)."""
    return log_mixture(wins, losses, prior) + (wins + losses) * math.log(2)


def decide(wins: int, losses: int, alpha: float = ALPHA, prior: float = PRIOR) -> Decision:
    """`treatment` or `control` once E_n ≥ 1/α (the side with more wins), else `continue`."""
    if log_e_value(wins, losses, prior) < -math.log(alpha):
        return "continue"
    return "treatment" if wins > losses else "control"


def confidence_sequence(wins: int, losses: int, alpha: float = ALPHA,
                        prior: float = PRIOR) -> tuple[float, float]:
    """[lo, hi]: the shares p of treatment's wins the mixture test does not reject at α.

    The set is {p : W log p + L log(1 − p) > log_mixture − log(1/α)}, an interval
    around W / n (its left side is concave in p); its ends are found by bisection."""
    bound = log_mixture(wins, losses, prior) + math.log(alpha)

    def inside(p: float) -> bool:
        return (wins * math.log(p) if wins else 0.0) + (
            losses * math.log1p(-p) if losses else 0.0) > bound

    n = wins + losses
    centre = wins / n if n else 0.5  # the maximum of the left side: always inside
    return (0.0 if not wins else _edge(inside, centre, 0.0),
            1.0 if not losses else _edge(inside, centre, 1.0))


def _edge(inside: Any, within: float, outside: float) -> float:
    """The boundary between `within` (inside) and `outside` (outside) of the interval."""
    for _ in range(_STEPS):
        middle = (within + outside) / 2
        if middle in (within, outside):
            break
        if inside(middle):
            within = middle
        else:
            outside = middle
    return within


@dataclass(frozen=True, slots=True)
class Reading:
    """The test read once: the wins, the e-value, the decision and the preference."""

    wins: int  # treatment's
    losses: int  # control's
    alpha: float
    prior: float
    log_e: float
    decision: Decision
    interval: tuple[float, float]

    @property
    def preference(self) -> float | None:
        """Treatment's share of the decisive outcomes (None before any)."""
        n = self.wins + self.losses
        return self.wins / n if n else None

    def as_dict(self) -> dict[str, Any]:
        """The test's fields of GET /v1/experiments/{name}/results."""
        return {"decision": self.decision, "alpha": self.alpha,
                "e_value": _finite(math.exp(min(self.log_e, 700.0))),
                "preference": self.preference,
                "confidence_sequence": [self.interval[0], self.interval[1]],
                "prior": {"beta": [self.prior, self.prior]}}


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 1.7976931348623157e308


def read(wins: int, losses: int, alpha: float = ALPHA, prior: float = PRIOR) -> Reading:
    """The test after `wins` of treatment and `losses` (control's wins)."""
    if wins < 0 or losses < 0:
        raise ValueError("counts of wins are never negative")
    return Reading(wins, losses, alpha, prior, log_e_value(wins, losses, prior),
                   decide(wins, losses, alpha, prior),
                   confidence_sequence(wins, losses, alpha, prior))
