"""The chi-square survival function (no scipy) and the sample-ratio mismatch check."""
from __future__ import annotations

import math

import pytest

from app.experiments.srm import chi2_sf, counts_from_exposition, gamma_q, srm

# Critical values from published chi-square tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.4)
# with the upper-tail probability they belong to.
TABLE = [
    (3.841458820694124, 1, 0.05), (6.634896601021214, 1, 0.01),
    (10.827566170662733, 1, 0.001), (5.991464547107979, 2, 0.05),
    (13.815510557964274, 2, 0.001), (7.814727903251178, 3, 0.05),
    (11.070497693516351, 5, 0.05), (18.307038053275146, 10, 0.05),
    (29.588298445074418, 10, 0.001), (123.22522145336181, 99, 0.05),
    (148.23, 99, 0.001),
]


@pytest.mark.parametrize(("x", "df", "p"), TABLE)
def test_chi2_sf_against_tables(x, df, p):
    assert chi2_sf(x, df) == pytest.approx(p, rel=2e-3 if x == 148.23 else 1e-7)


@pytest.mark.parametrize("x", [0.001, 0.3, 1.0, 2.5, 7.0, 20.0, 60.0, 150.0])
def test_closed_forms(x):
    # df = 1: erfc(sqrt(x/2)); df = 2: exp(-x/2); a = 1/2 and 1 cover both branches.
    assert chi2_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-9, abs=1e-300)
    assert chi2_sf(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-9, abs=1e-300)
    # integer a: Q(n, x) = exp(-x) Σ_{k<n} x^k / k!
    n = 4
    expected = math.exp(-x) * sum(x ** k / math.factorial(k) for k in range(n))
    assert gamma_q(n, x) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_edges():
    assert chi2_sf(0.0, 3) == 1.0
    assert chi2_sf(1e4, 1) == 0.0 or chi2_sf(1e4, 1) < 1e-300
    with pytest.raises(ValueError):
        chi2_sf(1.0, 0)


def test_srm_flags_a_broken_split_and_passes_a_fair_one():
    designs = {"e": {"control": 5000, "treatment": 5000}}
    fair = srm({("e", "control"): 5012, ("e", "treatment"): 4988}, designs)[0]
    assert not fair.flagged and fair.p_value > 0.5 and fair.df == 1
    assert fair.expected == {"control": 5000.0, "treatment": 5000.0}
    broken = srm({("e", "control"): 5200, ("e", "treatment"): 4800}, designs)[0]
    # chi2 = 2 * 200^2 / 5000 = 16 → p = erfc(sqrt(8)) ≈ 6.3e-5
    assert broken.chi2 == pytest.approx(16.0)
    assert broken.p_value == pytest.approx(math.erfc(math.sqrt(8)))
    assert broken.flagged


def test_srm_uneven_weights_zero_weight_and_no_data():
    designs = {"e": {"control": 1000, "b": 1000, "c": 8000}, "z": {"a": 5000, "off": 0},
               "quiet": {"a": 1, "b": 1}}
    got = {r.experiment: r for r in srm({("e", "control"): 100, ("e", "b"): 95,
                                         ("e", "c"): 805, ("z", "a"): 10,
                                         ("z", "off"): 1}, designs)}
    assert got["e"].df == 2 and not got["e"].flagged
    assert got["z"].flagged and got["z"].p_value == 0.0
    assert got["quiet"].p_value is None and not got["quiet"].flagged


def test_counts_from_exposition_sum_series():
    text = ('# TYPE rearrange_experiment_assignments_total counter\n'
            'rearrange_experiment_assignments_total{experiment="e",variant="control"} 3.0\n'
            'rearrange_experiment_assignments_total{experiment="e",variant="treatment"} 4.0\n'
            'rearrange_experiment_assignments_created{experiment="e",variant="control"} 1.7e9\n')
    assert counts_from_exposition(text) == {("e", "control"): 3.0, ("e", "treatment"): 4.0}
