"""The rerank formulas of seed 002, with the seed's own numbers."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.helpers import ctx, doc, make
from tests.reference.rules.demotion import AntiSeoReset, SandboxDamping, SpamDemotion, spam_penalty


@pytest.mark.parametrize(("spam", "expected"), [(0.9, 3.0), (0.4, 7.0), (0.1, 8.0), (0.8, 3.0)])
def test_spam_demotion_seed_examples(spam, expected):
    # Seed 002 §16.2: rank 8.0, θ_low 0.3, θ_high 0.8, λ 5; spam 0.9 → 3.0, spam 0.4 → 7.0.
    rule = make(SpamDemotion, theta_low=0.3, theta_high=0.8, **{"lambda": 5.0})
    out, records = rule([doc("a", 8.0, spam_score=spam)], ctx())
    assert out[0].score == pytest.approx(expected)
    if expected == 8.0:
        assert records == []
    else:
        assert records[0].action == "rescore"
        assert records[0].delta == pytest.approx(expected - 8.0)


def test_spam_demotion_whose_delta_underflows_to_zero_changes_nothing():
    rule = make(SpamDemotion, theta_low=0.3, theta_high=0.8, **{"lambda": 1e-320})
    d = doc("a", spam_score=0.3000001)  # penalty 2e-7: -1e-320 x 2e-7 is -0.0
    out, records = rule([d], ctx())
    assert records == [] and out[0] is d


def test_spam_penalty_is_piecewise_linear():
    assert spam_penalty(0.29, 0.3, 0.8) == 0.0
    assert spam_penalty(0.3, 0.3, 0.8) == 0.0
    assert spam_penalty(0.55, 0.3, 0.8) == pytest.approx(0.5)
    assert spam_penalty(0.8, 0.3, 0.8) == pytest.approx(1.0)
    assert spam_penalty(0.81, 0.3, 0.8) == 1.0


def test_spam_demotion_rejects_inverted_thresholds():
    with pytest.raises(ValidationError, match="theta_low"):
        make(SpamDemotion, theta_low=0.8, theta_high=0.3)


def test_sandbox_curve_rises_monotonically_to_no_damping_at_t():
    rule = make(SandboxDamping, t_sandbox_days=120, beta=0.5)
    ages = list(range(0, 200, 5))
    scores = [rule([doc("a", 10.0, domain_age_days=a)], ctx())[0][0].score for a in ages]
    assert all(x < y for x, y in zip(scores[:25], scores[1:25], strict=False))  # rising to T
    assert scores[0] == pytest.approx(10.0 * (1 - 0.5))  # age 0: trust 0, full β damping
    assert scores[ages.index(60)] == pytest.approx(10.0 * (1 - 0.5 * 0.5))  # half-way
    assert all(s == 10.0 for a, s in zip(ages, scores, strict=True) if a >= 120)
    _, [record] = rule([doc("a", 10.0, domain_age_days=30)], ctx())
    assert record.reason == "domain age 30 days: trust 0.250, beta 0.5"


def test_sandbox_leaves_unknown_age_and_non_positive_scores_alone():
    rule = make(SandboxDamping)
    out, records = rule([doc("a", 5.0), doc("b", -2.0, domain_age_days=1)], ctx())
    assert [d.score for d in out] == [5.0, -2.0]
    assert records == []


def test_anti_seo_reset_neutralises_boosted_documents_without_detection():
    # Seed 002 §16.4 lab: three "boosters" with inflated link/behav blocks and middling quality
    # outrank honest pages; reset zeroes those blocks for everyone, and they fall back.
    honest = [doc(f"h{i}", host=f"h{i}.example",
                  factors={"text": 3.0 - 0.1 * i, "quality": 2.0, "link": 0.5, "behav": 0.3})
              for i in range(9)]
    boosted = [doc(f"b{i}", host=f"b{i}.example",
                   factors={"text": 2.0, "quality": 1.0, "link": 4.0, "behav": 3.0})
               for i in range(3)]
    for d in honest + boosted:
        d.score = d.original_score = sum(d.factors.values())
    ranked = sorted(honest + boosted, key=lambda d: -d.score)
    assert {d.id for d in ranked[:3]} == {"b0", "b1", "b2"}  # boosters on top before reset
    out, records = make(AntiSeoReset)(ranked, ctx(classes=("commercial",)))
    after = sorted(out, key=lambda d: -d.score)
    assert {d.id for d in after[-3:]} == {"b0", "b1", "b2"}  # and at the bottom after it
    for d in out:
        assert d.score == pytest.approx(d.factors["text"] + d.factors["quality"])
    assert len(records) == 12 and all(r.action == "rescore" for r in records)


def test_anti_seo_reset_partial_weight_and_unknown_weight_refused():
    rule = make(AntiSeoReset, blocks=["link"], weights={"link": 0.5})
    out, _ = rule([doc("a", 10.0, factors={"link": 4.0, "behav": 2.0})], ctx())
    assert out[0].score == pytest.approx(8.0)
    with pytest.raises(ValidationError, match="weights.behav"):
        make(AntiSeoReset, blocks=["link"], weights={"behav": 1.0})
