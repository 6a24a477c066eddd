"""The rerank formulas of seed 002, with the seed's own numbers, through the engine;
the quarantine's demotion."""
from __future__ import annotations

import pytest

from app.banlist.model import Entry
from app.config.load import load_bytes
from app.errors import ConfigError
from tests.sides import document as doc
from tests.sides import only


def rescores(answer, rule: str) -> list[tuple[str, float, str]]:
    """(doc_id, delta, reason) of each rescore record of `rule`."""
    return [(r["doc_id"], r["delta"], r["reason"]) for r in answer.records(rule)
            if r["action"] == "rescore"]


SPAM = only("rerank", {"spam_demotion": {"theta_low": 0.3, "theta_high": 0.8, "lambda": 5.0}})


@pytest.mark.parametrize(("spam", "expected"), [(0.9, 3.0), (0.4, 7.0), (0.1, 8.0), (0.8, 3.0)])
def test_spam_demotion_seed_examples(side, spam, expected):
    # Seed 002 §16.2: rank 8.0, θ_low 0.3, θ_high 0.8, λ 5; spam 0.9 → 3.0, spam 0.4 → 7.0.
    out = side.rerank(SPAM, [doc("a", 8.0, spam_score=spam)])
    assert out.scores() == [pytest.approx(expected)]
    records = rescores(out, "spam_demotion")
    if expected == 8.0:
        assert records == []
    else:
        assert [delta for _, delta, _ in records] == [pytest.approx(expected - 8.0)]


def test_spam_demotion_whose_delta_underflows_to_zero_changes_nothing(side):
    config = only("rerank", {"spam_demotion": {"theta_low": 0.3, "theta_high": 0.8,
                                               "lambda": 1e-320}})
    out = side.rerank(config, [doc("a", spam_score=0.3000001)])  # -1e-320 x 2e-7 is -0.0
    assert out.records() == [] and out.scores() == [1.0]


def test_spam_penalty_is_piecewise_linear(side):
    # λ 1: the delta is minus the penalty; 0 up to θ_low inclusive, 1 from θ_high on.
    config = only("rerank", {"spam_demotion": {"theta_low": 0.3, "theta_high": 0.8,
                                               "lambda": 1.0}})
    spams = [0.29, 0.3, 0.55, 0.8, 0.81]
    out = side.rerank(config, [doc(f"d{i}", 10.0 - i, spam_score=s) for i, s in enumerate(spams)])
    deltas = {i: delta for i, delta, _ in rescores(out, "spam_demotion")}
    assert set(deltas) == {"d2", "d3", "d4"}
    assert deltas["d2"] == pytest.approx(-0.5)
    assert deltas["d3"] == pytest.approx(-1.0) and deltas["d4"] == -1.0
    assert rescores(out, "spam_demotion")[0][2] == "spam_score 0.55: penalty 0.5 x lambda 1"


def test_spam_demotion_rejects_inverted_thresholds():
    config = only("rerank", {"spam_demotion": {"theta_low": 0.8, "theta_high": 0.3}})
    with pytest.raises(ConfigError, match="theta_low"):
        load_bytes(config.encode())


def test_sandbox_curve_rises_monotonically_to_no_damping_at_t(side):
    config = only("rerank", {"sandbox_damping": {"t_sandbox_days": 120, "beta": 0.5}})
    ages = list(range(0, 200, 5))
    out = side.rerank(config, [doc(f"d{a}", 10.0, domain_age_days=a) for a in ages])
    score = {d["id"]: d["score"] for d in out.documents}
    scores = [score[f"d{a}"] for a in ages]
    assert all(x < y for x, y in zip(scores[:25], scores[1:25], strict=False))  # rising to T
    assert scores[0] == pytest.approx(10.0 * (1 - 0.5))  # age 0: trust 0, full β damping
    assert scores[ages.index(60)] == pytest.approx(10.0 * (1 - 0.5 * 0.5))  # half-way
    assert all(s == 10.0 for a, s in zip(ages, scores, strict=True) if a >= 120)
    reasons = {i: why for i, _, why in rescores(out, "sandbox_damping")}
    assert reasons["d30"] == "domain age 30 days: trust 0.250, beta 0.5"


def test_sandbox_leaves_unknown_age_and_non_positive_scores_alone(side):
    out = side.rerank(only("rerank", "sandbox_damping"),
                      [doc("a", 5.0), doc("b", -2.0, domain_age_days=1)])
    assert out.scores() == [5.0, -2.0] and out.records() == []


def test_anti_seo_reset_neutralises_boosted_documents_without_detection(side):
    # Seed 002 §16.4 lab: three "boosters" with inflated link/behav blocks and middling quality
    # outrank honest pages; reset zeroes those blocks for everyone, and they fall back.
    honest = [{"text": 3.0 - 0.1 * i, "quality": 2.0, "link": 0.5, "behav": 0.3}
              for i in range(9)]
    boosted = [{"text": 2.0, "quality": 1.0, "link": 4.0, "behav": 3.0} for _ in range(3)]
    page = [doc(f"h{i}", sum(f.values()), factors=f) for i, f in enumerate(honest)] + [
        doc(f"b{i}", sum(f.values()), factors=f) for i, f in enumerate(boosted)]
    page.sort(key=lambda d: -d["score"])
    assert {d["id"] for d in page[:3]} == {"b0", "b1", "b2"}  # boosters on top before reset
    out = side.rerank(only("rerank", "anti_seo_reset"), page, query={"classes": ["commercial"]})
    assert set(out.ids()[-3:]) == {"b0", "b1", "b2"}  # and at the bottom after it
    factors = {d["id"]: d["factors"] for d in page}
    for d in out.documents:
        assert d["score"] == pytest.approx(factors[d["id"]]["text"] + factors[d["id"]]["quality"])
    assert len(rescores(out, "anti_seo_reset")) == 12
    assert rescores(out, "anti_seo_reset")[0][2] == "reset factor blocks link=4, behav=3"


def test_anti_seo_reset_partial_weight_and_unknown_weight_refused(side):
    config = only("rerank", {"anti_seo_reset": {"blocks": ["link"], "weights": {"link": 0.5}}})
    out = side.rerank(config, [doc("a", 10.0, factors={"link": 4.0, "behav": 2.0})])
    assert out.scores() == [pytest.approx(8.0)]
    with pytest.raises(ConfigError, match="weights.behav"):
        load_bytes(only("rerank", {"anti_seo_reset": {"blocks": ["link"],
                                                      "weights": {"behav": 1.0}}}).encode())


def test_quarantine_demotion_penalises_host_and_subdomains(side):
    quarantine = [Entry("q1", "domain", "grey.example", "spam_score 0.75", "antispam", 0.0,
                        None, frozenset())]
    loaded = side.load(only("rerank", {"quarantine_demotion": {"penalty": 2.5}}))
    docs = [doc("a", 8.0, host="www.grey.example"), doc("b", 7.0, host="ok.example")]
    out = loaded.rerank(docs, quarantine=quarantine, now=1.0)
    assert out.ids() == ["b", "a"] and out.scores() == [7.0, 5.5]
    assert rescores(out, "quarantine_demotion") == [
        ("a", -2.5, "domain grey.example is in spam quarantine [entry q1]")]
    assert loaded.rerank(docs).records() == []  # no quarantine list
    assert loaded.rerank(docs, quarantine=[]).records() == []
