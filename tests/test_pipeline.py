"""The runner: phase order, stable sort, audit completeness, shadow mode, fallback."""
from __future__ import annotations

import msgspec
import pytest

from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.config import load_bytes
from app.pipeline import Phase, Step
from tests.helpers import Ticking, doc, ids, make
from tests.reference.pipeline import APPLIED, SHADOW, Context, Pipeline, sort_by_score
from tests.reference.rules import behaviour
from tests.reference.rules.demotion import SpamDemotion
from tests.reference.rules.diversity import HostCrowding
from tests.reference.rules.filters import Banlist, SafeSearch
from tests.reference.rules.labels import AdLabel
from tests.reference.rules.trim import Depth
from tests.test_shingles import KAZAN, OMSK, PERM, RETURNS

SEED_CONFIG = b"""
profiles:
  default:
    pre-filter: [banlist]
    rerank: [spam_demotion]
    diversify: [{host_crowding: {max_per_host: 1}}]
    trim: [{depth: {k: 3}}]
    annotate: [ad_label]
    post-filter: [safe_search, empty_result_fallback]
"""


def default_profile(config: bytes) -> Pipeline:
    """The default profile of a config, each rule with its reference behaviour."""
    return Pipeline.of(load_bytes(config).profiles["default"], behaviour)


def seed_page():
    """Seed 002 §16.1: [A, B(spam), C, D(banned), E]; A and C share a host; E is an ad."""
    return [doc("A", 10.0, host="shop.example", position=1),
            doc("B", 9.0, host="b.example", spam_score=0.9, position=2),
            doc("C", 8.0, host="shop.example", position=3),
            doc("D", 7.0, host="banned.example", position=4),
            doc("E", 6.0, host="e.example", is_ad=True, position=5)]


def seed_ctx():
    ban = Entry("1", "domain", "banned.example", "legal removal", "tns", 0.0, None, frozenset())
    return Context(banlist=BanIndex([ban]), input_count=5, now=1.0)


def test_seed_worked_example():
    pipeline = default_profile(SEED_CONFIG)
    out = pipeline.run(seed_page(), seed_ctx())
    assert ids(out.docs) == ["A", "E", "B"]
    assert [c["id"] for c in out.docs[0].collapsed] == ["C"]
    assert out.docs[1].annotations == ("ad",)
    by_doc = {(r.doc_id, r.action) for r in out.audit}
    assert {("D", "remove"), ("B", "rescore"), ("B", "move"), ("C", "collapse"),
            ("E", "annotate")} <= by_doc
    assert out.fallback is None


def test_a_post_filter_removal_takes_what_was_collapsed_under_it_with_a_record():
    """A post-filter runs after diversify: a document it removes may lead others. They go
    with it, each with its own applied record, so every request document is still in the
    page, under a document of it, or in a record that says where it went."""
    pipeline = default_profile(b"""
profiles:
  default:
    pre-filter: [safe_search]
    diversify: [{host_crowding: {max_per_host: 1}}]
    post-filter: [{safe_search: {thresholds: {strict: 0.3, moderate: 0.5}}}]
""")
    page = [doc("a", 2.0, host="x.example", adult_score=0.6, position=1),
            doc("b", 1.0, host="x.example", position=2),
            doc("c", 0.5, host="y.example", position=3)]
    out = pipeline.run(page, Context(input_count=3))
    assert ids(out.docs) == ["c"]
    removed = {r.doc_id: r for r in out.audit if r.action == "remove" and r.mode == APPLIED}
    assert set(removed) == {"a", "b"}
    assert removed["b"].rule == "safe_search" and removed["b"].phase == Phase.POST_FILTER
    assert removed["b"].reason.startswith("collapsed under a, removed with it: ")
    assert removed["b"].reason.endswith(removed["a"].reason)


def test_every_difference_is_explained_by_an_applied_record():
    pipeline = default_profile(SEED_CONFIG)
    page = seed_page()
    out = pipeline.run(page, seed_ctx())
    applied = [r for r in out.audit if r.mode == APPLIED]
    gone = {d.id for d in page} - {d.id for d in out.docs}
    assert gone == {r.doc_id for r in applied if r.action in ("remove", "collapse", "trim")}
    for d in out.docs:
        rescored = sum(r.delta for r in applied if r.doc_id == d.id and r.action == "rescore")
        assert d.score == d.original_score + rescored
        labels = [r for r in applied if r.doc_id == d.id and r.action == "annotate"]
        assert len(d.annotations) == len(labels)


def test_diversify_before_trim_keeps_candidates_that_trim_first_loses():
    def step(cls, **params):
        return Step(make(cls, **params))

    phases = {
        Phase.PRE_FILTER: [step(Banlist)],
        Phase.RERANK: [step(SpamDemotion)],
        Phase.DIVERSIFY: [step(HostCrowding, max_per_host=1)],
        Phase.TRIM: [step(Depth, k=3)],
        Phase.ANNOTATE: [step(AdLabel)],
    }
    right = Pipeline("right", [(p, phases[p]) for p in (
        Phase.PRE_FILTER, Phase.RERANK, Phase.DIVERSIFY, Phase.TRIM, Phase.ANNOTATE)])
    swapped = Pipeline("swapped", [(p, phases[p]) for p in (
        Phase.PRE_FILTER, Phase.RERANK, Phase.TRIM, Phase.DIVERSIFY, Phase.ANNOTATE)])
    assert ids(right.run(seed_page(), seed_ctx()).docs) == ["A", "E", "B"]
    # Trim first cuts [A, C, E, B] to [A, C, E]; collapsing C then leaves two results:
    # B was a candidate to fill the page but trim had already thrown it away.
    assert ids(swapped.run(seed_page(), seed_ctx()).docs) == ["A", "E"]


def test_sort_after_rerank_is_stable_and_records_moves():
    docs = [doc("a", 5.0), doc("b", 5.0), doc("c", 6.0)]
    ordered, moves = sort_by_score(docs)
    assert ids(ordered) == ["c", "a", "b"]
    assert {(m.doc_id, m.delta) for m in moves} == {("c", -2), ("a", 1), ("b", 1)}
    assert sort_by_score(ordered)[1] == []


def test_shadow_rule_is_computed_but_changes_nothing():
    config = SEED_CONFIG + b"""
experiments:
  - {name: antispam_v7, unit: user_id, variants: {control: 50, treatment: 50},
     rules: [spam_demotion]}
"""
    pipeline = default_profile(config)
    base = seed_ctx()
    control = Context(banlist=base.banlist, input_count=5, now=1.0,
                      variants={"antispam_v7": "control"})
    treated = Context(banlist=base.banlist, input_count=5, now=1.0,
                      variants={"antispam_v7": "treatment"})
    out_c = pipeline.run(seed_page(), control)
    out_t = pipeline.run(seed_page(), treated)
    out_none = pipeline.run(seed_page(), Context(banlist=base.banlist, input_count=5, now=1.0))
    shadow = [r for r in out_c.audit if r.rule == "spam_demotion"]
    assert shadow and all(r.mode == SHADOW for r in shadow)
    assert ids(out_c.docs) == ids(out_none.docs) == ["A", "B", "E"]  # B not demoted
    assert [d.score for d in out_c.docs] == [10.0, 9.0, 6.0]
    assert ids(out_t.docs) == ["A", "E", "B"]


def test_relax_fallback_reruns_with_milder_mode_and_says_so():
    pipeline = default_profile(SEED_CONFIG)
    page = [doc("x", 2.0, adult_score=0.6), doc("y", 1.0, adult_score=0.7)]
    out = pipeline.run(page, Context(age_mode="strict", input_count=2))
    assert ids(out.docs) == ["x", "y"]
    assert out.fallback["action"] == "relax" and "moderate" in out.fallback["reason"]
    assert out.audit[0].action == "fallback"


def test_never_a_silent_empty_page():
    pipeline = default_profile(SEED_CONFIG)
    page = [doc("x", adult_score=0.95)]
    out = pipeline.run(page, Context(age_mode="strict", input_count=1))
    assert out.docs == [] and out.fallback["action"] == "empty"
    bare = Pipeline("bare", [(Phase.PRE_FILTER, [Step(make(SafeSearch))])])
    out = bare.run(page, Context(input_count=1))
    assert out.docs == [] and out.fallback == {
        "rule": "pipeline", "action": "empty",
        "reason": "filters removed all 1 documents; nothing safe was found"}
    assert bare.run([], Context()).fallback is None


def test_run_is_deterministic_for_a_fixed_context():
    pipeline = default_profile(SEED_CONFIG)
    runs = [pipeline.run(seed_page(), seed_ctx()) for _ in range(3)]
    assert len({tuple((d.id, d.score) for d in r.docs) for r in runs}) == 1
    assert len({tuple(str(msgspec.structs.asdict(a)) for a in r.audit) for r in runs}) == 1


EXPERIMENT = b"""
experiments:
  - name: antispam_v7
    unit: user_id
    variants:
      control: 40
      treatment: 30
      mild: {weight: 30, params: {spam_demotion: {lambda: 0.5}}}
    rules: [spam_demotion]
"""


def _snapshot(out):
    docs = [(d.id, d.score, d.original_position, d.annotations, d.collapsed, d.url)
            for d in out.docs]
    applied = [msgspec.structs.asdict(r) for r in out.audit if r.mode == APPLIED]
    return docs, applied, out.fallback


def test_control_output_is_identical_to_no_experiment():
    # Without the experiment (and so without the rule it would ship) vs with it in control:
    # the shadow run must leave no trace on the page or on the applied audit.
    without = default_profile(SEED_CONFIG.replace(b"rerank: [spam_demotion]", b"rerank: []")
                         )
    with_exp = default_profile(SEED_CONFIG + EXPERIMENT)
    base = seed_ctx()
    for variants in ({"antispam_v7": "control"}, {}):  # control, and outside the ranges
        ctx = Context(banlist=base.banlist, input_count=5, now=1.0, variants=variants)
        plain = without.run(seed_page(), Context(banlist=base.banlist, input_count=5, now=1.0))
        page = seed_page()
        gated = with_exp.run(page, ctx)
        assert _snapshot(gated) == _snapshot(plain)
        assert [(d.id, d.score) for d in page] == [(d.id, d.score) for d in seed_page()]
        shadow = [r for r in gated.audit if r.mode == SHADOW]
        assert shadow and {r.rule for r in shadow} == {"spam_demotion"}


def test_treatment_applies_and_variant_params_override():
    pipeline = default_profile(SEED_CONFIG + EXPERIMENT)
    base = seed_ctx()

    def run(variant):
        ctx = Context(banlist=base.banlist, input_count=5, now=1.0,
                      variants={"antispam_v7": variant})
        return pipeline.run(seed_page(), ctx)

    treated, mild = run("treatment"), run("mild")
    b = [r for r in treated.audit if r.rule == "spam_demotion"]
    assert [(r.doc_id, r.delta, r.mode) for r in b] == [("B", -5.0, APPLIED)]
    m = [r for r in mild.audit if r.rule == "spam_demotion"]
    assert [(r.doc_id, r.delta, r.mode) for r in m] == [("B", -0.5, APPLIED)]
    assert ids(treated.docs) == ["A", "E", "B"] and ids(mild.docs) == ["A", "B", "E"]


def test_optional_rules_are_skipped_past_the_deadline_and_reported():
    config = SEED_CONFIG.replace(b"    diversify: [{host_crowding: {max_per_host: 1}}]",
                                 b"    diversify: [{host_crowding: {max_per_host: 1}}, "
                                 b"near_duplicates]")
    pipeline = default_profile(config)
    page = [doc("A", 2.0, text="one two three four five six seven eight nine ten"),
            doc("B", 1.0, text="one two three four five six seven eight nine ten")]
    on_time = pipeline.run(page, Context(input_count=2, deadline=None))
    assert ids(on_time.docs) == ["A"] and on_time.skipped == []
    late = pipeline.run(page, Context(input_count=2, deadline=0.0))  # already past
    assert ids(late.docs) == ["A", "B"]
    assert late.skipped == [{"rule": "near_duplicates", "phase": "diversify",
                             "reason": "deadline"}]
    assert all(r.rule != "near_duplicates" for r in late.audit)  # not run at all


NEAR_DUPLICATES_ONLY = b"""
profiles:
  default:
    diversify: [{near_duplicates: {method: %s, cache_mb: 0, exact_cache_mb: 0}}]
"""


def template_page():
    """Omsk's page holds 0.83 of Kazan's and of Perm's: both methods fold them under it."""
    return [doc(name, 5.0 - n, position=n, text=text) for n, (name, text) in
            enumerate([("omsk", OMSK), ("kazan", KAZAN), ("perm", PERM), ("returns", RETURNS)], 1)]


@pytest.mark.parametrize("method", ["exact", "minhash"])
def test_a_deadline_passing_while_near_duplicates_runs_leaves_the_page_as_it_came(method):
    # Caches off, so every run reads the clock as often; Ticking reads 0, 1, 2, …
    pipeline = default_profile(NEAR_DUPLICATES_ONLY % method.encode())
    page = template_page()
    counted = Ticking()
    done = pipeline.run(page, Context(input_count=4, deadline=1e9, clock=counted))
    assert ids(done.docs) == ["omsk", "returns"] and done.skipped == []
    checks = counted.reads - 1  # the runner reads the clock once, before the rule starts
    assert checks >= 4  # at least one per text
    for passed_at in range(1, checks + 1):  # the check at this read finds the deadline passed
        late = pipeline.run(page, Context(input_count=4, deadline=passed_at - 0.5,
                                          clock=Ticking()))
        assert late.docs == page and late.audit == []
        assert late.skipped == [{"rule": "near_duplicates", "phase": "diversify",
                                 "reason": "deadline (stopped while running)"}]
    on_time = pipeline.run(page, Context(input_count=4, deadline=checks + 0.5,
                                         clock=Ticking()))  # the last check is on time
    assert ids(on_time.docs) == ["omsk", "returns"] and on_time.skipped == []
    assert [r.doc_id for r in on_time.audit] == ["kazan", "perm"]
