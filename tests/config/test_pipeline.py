"""The runner, through the engine: phase order, stable sort, audit
completeness, shadow mode, variants, fallback, the deadline."""
from __future__ import annotations

import pytest

from app.banlist.model import Entry
from tests.neardup.test_shingles import KAZAN, OMSK, PERM, RETURNS
from tests.sides import document as doc

SEED_CONFIG = """
profiles:
  default:
    pre-filter: [banlist]
    rerank: [spam_demotion]
    diversify: [{host_crowding: {max_per_host: 1}}]
    trim: [{depth: {k: 3}}]
    annotate: [ad_label]
    post-filter: [safe_search, empty_result_fallback]
"""
EXPERIMENT = """
experiments:
  - name: antispam_v7
    unit: user_id
    variants:
      control: 40
      treatment: 30
      mild: {weight: 30, params: {spam_demotion: {lambda: 0.5}}}
    rules: [spam_demotion]
"""
BANS = [Entry("1", "domain", "banned.example", "legal removal", "tns", 0.0, None, frozenset())]


def seed_page():
    """Seed 002 §16.1: [A, B(spam), C, D(banned), E]; A and C share a host; E is an ad."""
    return [doc("A", 10.0, host="shop.example"), doc("B", 9.0, spam_score=0.9),
            doc("C", 8.0, host="shop.example"), doc("D", 7.0, host="banned.example"),
            doc("E", 6.0, is_ad=True)]


def applied(answer) -> list[dict]:
    return [r for r in answer.records() if r["mode"] == "applied"]


def test_seed_worked_example(side):
    out = side.rerank(SEED_CONFIG, seed_page(), bans=BANS, now=1.0)
    assert out.ids() == ["A", "E", "B"]
    assert [c["id"] for c in out.documents[0]["collapsed"]] == ["C"]
    assert out.documents[1]["annotations"] == ["ad"]
    by_doc = {(r["doc_id"], r["action"]) for r in out.records()}
    assert {("D", "remove"), ("B", "rescore"), ("B", "move"), ("C", "collapse"),
            ("E", "annotate")} <= by_doc
    assert out.body["fallback"] is None
    assert out.body["removed"] == [{"id": "D", "rule": "banlist", "phase": "pre-filter",
                                    "action": "remove", "reason": BANS[0].describe()}]


def test_a_post_filter_removal_takes_what_was_collapsed_under_it_with_a_record(side):
    """A post-filter runs after diversify: a document it removes may lead others. They go
    with it, each with its own applied record, so every request document is still in the
    page, under a document of it, or in a record that says where it went."""
    config = """
profiles:
  default:
    pre-filter: [safe_search]
    diversify: [{host_crowding: {max_per_host: 1}}]
    post-filter: [{safe_search: {thresholds: {strict: 0.3, moderate: 0.5}}}]
"""
    page = [doc("a", 2.0, host="x.example", adult_score=0.6),
            doc("b", 1.0, host="x.example"), doc("c", 0.5, host="y.example")]
    out = side.rerank(config, page)
    assert out.ids() == ["c"]
    removed = {r["doc_id"]: r for r in applied(out) if r["action"] == "remove"}
    assert set(removed) == {"a", "b"}
    assert (removed["b"]["rule"], removed["b"]["phase"]) == ("safe_search", "post-filter")
    assert removed["b"]["reason"] == f"collapsed under a, removed with it: {removed['a']['reason']}"


def test_every_difference_is_explained_by_an_applied_record(side):
    page = seed_page()
    out = side.rerank(SEED_CONFIG, page, bans=BANS, now=1.0)
    gone = {d["id"] for d in page} - set(out.ids())
    assert gone == {r["doc_id"] for r in applied(out)
                    if r["action"] in ("remove", "collapse", "trim")}
    for d in out.documents:
        rescored = sum(r["delta"] for r in applied(out)
                       if r["doc_id"] == d["id"] and r["action"] == "rescore")
        assert d["score"] == d["original_score"] + rescored
        labels = [r for r in applied(out) if r["doc_id"] == d["id"] and r["action"] == "annotate"]
        assert len(d["annotations"]) == len(labels)


def test_sort_after_rerank_is_stable_and_records_moves(side):
    loaded = side.load("profiles:\n  default:\n    rerank: [spam_demotion]\n")
    out = loaded.rerank([doc("a", 5.0), doc("b", 5.0), doc("c", 6.0)])
    assert out.ids() == ["c", "a", "b"]
    assert [(r["rule"], r["doc_id"], r["delta"]) for r in out.records()] == [
        ("sort", "c", -2), ("sort", "a", 1), ("sort", "b", 1)]
    assert out.records()[0]["reason"] == ("stable sort by score after rerank: displaced by "
                                          "rescored documents")
    assert loaded.rerank([doc("c", 6.0), doc("a", 5.0), doc("b", 5.0)]).records() == []


def test_shadow_rule_is_computed_but_changes_nothing(side):
    loaded = side.load(SEED_CONFIG + EXPERIMENT)
    out_c = loaded.rerank(seed_page(), bans=BANS, now=1.0, variants={"antispam_v7": "control"})
    out_t = loaded.rerank(seed_page(), bans=BANS, now=1.0,
                          variants={"antispam_v7": "treatment"})
    out_none = loaded.rerank(seed_page(), bans=BANS, now=1.0)  # no unit: in no variant
    shadow = out_c.records("spam_demotion")
    assert shadow and all(r["mode"] == "shadow" for r in shadow)
    assert out_c.ids() == out_none.ids() == ["A", "B", "E"]  # B not demoted
    assert out_c.scores() == [10.0, 9.0, 6.0]
    assert out_t.ids() == ["A", "E", "B"]


def test_relax_fallback_reruns_with_milder_mode_and_says_so(side):
    page = [doc("x", 2.0, adult_score=0.6), doc("y", 1.0, adult_score=0.7)]
    out = side.rerank(SEED_CONFIG, page, query={"age_mode": "strict"})
    assert out.ids() == ["x", "y"]
    assert out.body["fallback"]["action"] == "relax"
    assert "moderate" in out.body["fallback"]["reason"]
    assert out.records()[0]["action"] == "fallback"  # the first attempt's other records: gone


def test_never_a_silent_empty_page(side):
    page = [doc("x", adult_score=0.95)]
    out = side.rerank(SEED_CONFIG, page, query={"age_mode": "strict"})
    assert out.ids() == [] and out.body["fallback"]["action"] == "empty"
    bare = side.load("profiles:\n  default:\n    pre-filter: [safe_search]\n")
    out = bare.rerank(page)
    assert out.ids() == [] and out.body["fallback"] == {
        "rule": "pipeline", "action": "empty",
        "reason": "filters removed all 1 documents; nothing safe was found"}
    assert bare.rerank([]).body["fallback"] is None


def test_run_is_deterministic_for_a_fixed_request(side):
    loaded = side.load(SEED_CONFIG)
    runs = [loaded.rerank(seed_page(), bans=BANS, now=1.0).body for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


def _snapshot(out):
    docs = [(d["id"], d["score"], d["original_position"], d["annotations"], d["collapsed"],
             d["url"]) for d in out.documents]
    return docs, applied(out), out.body["fallback"]


def test_control_output_is_identical_to_no_experiment(side):
    # Without the experiment (and so without the rule it would ship) vs with it in control:
    # the shadow run must leave no trace on the page or on the applied audit.
    without = side.load(SEED_CONFIG.replace("rerank: [spam_demotion]", "rerank: []"))
    with_exp = side.load(SEED_CONFIG + EXPERIMENT)
    plain = without.rerank(seed_page(), bans=BANS, now=1.0)
    for variants in ({"antispam_v7": "control"}, None):  # control, and in no variant
        gated = with_exp.rerank(seed_page(), bans=BANS, now=1.0, variants=variants)
        assert _snapshot(gated) == _snapshot(plain)
        shadow = [r for r in gated.records() if r["mode"] == "shadow"]
        assert shadow and {r["rule"] for r in shadow} == {"spam_demotion"}


def test_treatment_applies_and_variant_params_override(side):
    loaded = side.load(SEED_CONFIG + EXPERIMENT)

    def run(variant):
        return loaded.rerank(seed_page(), bans=BANS, now=1.0, variants={"antispam_v7": variant})

    treated, mild = run("treatment"), run("mild")
    assert [(r["doc_id"], r["delta"], r["mode"]) for r in treated.records("spam_demotion")] == [
        ("B", -5.0, "applied")]
    assert [(r["doc_id"], r["delta"], r["mode"]) for r in mild.records("spam_demotion")] == [
        ("B", -0.5, "applied")]
    assert treated.ids() == ["A", "E", "B"] and mild.ids() == ["A", "B", "E"]


WITH_NEAR_DUPLICATES = SEED_CONFIG.replace(
    "    diversify: [{host_crowding: {max_per_host: 1}}]",
    "    diversify: [{host_crowding: {max_per_host: 1}}, near_duplicates]")


def test_optional_rules_are_skipped_past_the_deadline_and_reported(side):
    loaded = side.load(WITH_NEAR_DUPLICATES)
    page = [doc("A", 2.0, text="one two three four five six seven eight nine ten"),
            doc("B", 1.0, text="one two three four five six seven eight nine ten")]
    on_time = loaded.rerank(page)
    assert on_time.ids() == ["A"] and "skipped" not in on_time.body
    late = loaded.rerank(page, deadline_after=0)  # already past at the first read
    assert late.ids() == ["A", "B"]
    assert late.body["skipped"] == [{"rule": "near_duplicates", "phase": "diversify",
                                     "reason": "deadline"}]
    assert late.records("near_duplicates") == []  # not run at all


NEAR_DUPLICATES_ONLY = """
profiles:
  default:
    diversify: [{near_duplicates: {method: %s, cache_mb: 0, exact_cache_mb: 0}}]
"""


@pytest.mark.parametrize("method", ["exact", "minhash"])
def test_a_deadline_passing_while_near_duplicates_runs_leaves_the_page_as_it_came(side, method):
    """Omsk's page holds 0.83 of Kazan's and of Perm's: both methods fold them under it.
    Caches off, so every run reads the clock as often."""
    loaded = side.load(NEAR_DUPLICATES_ONLY % method)
    page = [doc(name, 5.0 - n, text=text) for n, (name, text) in
            enumerate([("omsk", OMSK), ("kazan", KAZAN), ("perm", PERM), ("returns", RETURNS)])]
    reads = 1  # the runner's, before the rule starts; then the rule's checks
    while "skipped" in (late := loaded.rerank(page, deadline_after=reads)).body:
        assert late.ids() == [d["id"] for d in page] and late.records() == []
        assert all(d["collapsed"] == [] for d in late.documents)
        assert late.body["skipped"] == [{"rule": "near_duplicates", "phase": "diversify",
                                         "reason": "deadline"}]
        reads += 1
    assert reads >= 5  # at least one check per text
    assert late.ids() == ["omsk", "returns"]  # the first budget the rule finishes within
    assert [r["doc_id"] for r in late.records()] == ["kazan", "perm"]
    assert loaded.rerank(page).body == late.body
