"""Sample-ratio mismatch: chi-square test of observed assignments against configured weights.

The chi-square survival function is the regularized upper incomplete gamma function
Q(k/2, x/2), computed here (series below a+1, Lentz's continued fraction above, as in
Numerical Recipes §6.2) so the service needs no scipy.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SRM_ALPHA = 0.001  # flag a split whose p-value is below this
_EPS = 1e-15
_MAX_ITER = 10_000


def gamma_q(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) = Γ(a, x) / Γ(a), for a > 0, x >= 0."""
    if a <= 0:
        raise ValueError("a must be > 0")
    if x <= 0:
        return 1.0
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:  # the series for P converges fast here
        term = total = 1.0 / a
        ap = a
        for _ in range(_MAX_ITER):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    tiny = 1e-300  # the continued fraction for Q, modified Lentz
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < _EPS:
            break
    return math.exp(log_prefix) * h


def chi2_sf(statistic: float, df: int) -> float:
    """P(X >= statistic) for X chi-square with df degrees of freedom."""
    if df < 1:
        raise ValueError("df must be >= 1")
    return gamma_q(df / 2, statistic / 2)


@dataclass(frozen=True, slots=True)
class SrmResult:
    """One experiment's split: observed and expected counts, the statistic and the verdict."""

    experiment: str
    observed: dict[str, float]
    expected: dict[str, float]
    chi2: float | None     # None with no data, or traffic in a 0-weight variant
    df: int
    p_value: float | None  # None: no data, or a single variant (nothing to compare)
    flagged: bool

    def as_dict(self) -> dict[str, object]:
        return {"experiment": self.experiment, "observed": self.observed,
                "expected": self.expected, "chi2": self.chi2, "df": self.df,
                "p_value": self.p_value, "flagged": self.flagged}


def srm(counts: Mapping[tuple[str, str], float],
        designs: Mapping[str, Mapping[str, int]]) -> list[SrmResult]:
    """Test each experiment's observed (experiment, variant) counts against its design.

    `designs` maps experiment → variant → weight (any unit: buckets, percent). A variant
    with weight 0 that still received traffic is a mismatch by itself (p = 0).
    """
    results = []
    for experiment, weights in designs.items():
        observed = {v: float(counts.get((experiment, v), 0.0)) for v in weights}
        total_n = sum(observed.values())
        total_w = sum(weights.values())
        live = [v for v, w in weights.items() if w > 0]
        if total_n and any(observed[v] > 0 for v, w in weights.items() if w == 0):
            expected = {v: total_n * w / total_w if total_w else 0.0 for v, w in weights.items()}
            results.append(SrmResult(experiment, observed, expected, None,
                                     max(len(live) - 1, 0), 0.0, True))
            continue
        if total_n == 0 or len(live) < 2:
            results.append(SrmResult(experiment, observed, {}, None, 0, None, False))
            continue
        expected = {v: total_n * w / total_w for v, w in weights.items()}
        stat = sum((observed[v] - expected[v]) ** 2 / expected[v] for v in live)
        p = chi2_sf(stat, len(live) - 1)
        results.append(SrmResult(experiment, observed, expected, stat, len(live) - 1, p,
                                 p < SRM_ALPHA))
    return results


def document(results: list[SrmResult], config_version: str) -> dict[str, Any]:
    """The check as GET /v1/experiments/srm and `rearrange experiments srm --json` give it."""
    return {"config_version": config_version, "alpha": SRM_ALPHA,
            "flagged": [r.experiment for r in results if r.flagged],
            "experiments": [r.as_dict() for r in results]}


def counts_from_exposition(text: str) -> dict[tuple[str, str], float]:
    """(experiment, variant) → count from Prometheus text (summed over every series)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "rearrange_experiment_assignments":
            continue
        for sample in family.samples:
            if sample.name == "rearrange_experiment_assignments_total":
                key = (sample.labels["experiment"], sample.labels["variant"])
                out[key] = out.get(key, 0.0) + sample.value
    return out
