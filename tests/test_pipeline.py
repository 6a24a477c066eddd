"""The runner: phase order, stable sort, audit completeness, shadow mode, fallback."""
from __future__ import annotations

from collections import Counter
from operator import attrgetter

import msgspec
import pytest

from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.config import load_bytes
from app.pipeline import APPLIED, SHADOW, Context, Phase, Pipeline, Step, sort_by_score
from app.rules.demotion import SpamDemotion
from app.rules.diversity import HostCrowding
from app.rules.filters import Banlist, SafeSearch
from app.rules.labels import AdLabel
from app.rules.trim import Depth
from tests.helpers import Ticking, doc, ids, make
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
    pipeline = load_bytes(SEED_CONFIG).profiles["default"]
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
    pipeline = load_bytes(b"""
profiles:
  default:
    pre-filter: [safe_search]
    diversify: [{host_crowding: {max_per_host: 1}}]
    post-filter: [{safe_search: {thresholds: {strict: 0.3, moderate: 0.5}}}]
""").profiles["default"]
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
    pipeline = load_bytes(SEED_CONFIG).profiles["default"]
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
    pipeline = load_bytes(config).profiles["default"]
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
    pipeline = load_bytes(SEED_CONFIG).profiles["default"]
    page = [doc("x", 2.0, adult_score=0.6), doc("y", 1.0, adult_score=0.7)]
    out = pipeline.run(page, Context(age_mode="strict", input_count=2))
    assert ids(out.docs) == ["x", "y"]
    assert out.fallback["action"] == "relax" and "moderate" in out.fallback["reason"]
    assert out.audit[0].action == "fallback"


def test_never_a_silent_empty_page():
    pipeline = load_bytes(SEED_CONFIG).profiles["default"]
    page = [doc("x", adult_score=0.95)]
    out = pipeline.run(page, Context(age_mode="strict", input_count=1))
    assert out.docs == [] and out.fallback["action"] == "empty"
    bare = Pipeline("bare", [(Phase.PRE_FILTER, [Step(make(SafeSearch))])])
    out = bare.run(page, Context(input_count=1))
    assert out.docs == [] and out.fallback == {
        "rule": "pipeline", "action": "empty",
        "reason": "filters removed all 1 documents; nothing safe was found"}
    assert bare.run([], Context()).fallback is None


def test_outcome_counts_its_audit_records_by_rule_phase_action_and_mode():
    # The metrics read Outcome.actions instead of keying every record: it must be the
    # audit's own tally in every kind of run (applied, shadow, sort moves, both fallbacks).
    gated = load_bytes(SEED_CONFIG + b"""
experiments:
  - {name: antispam_v7, unit: user_id, variants: {control: 50, treatment: 50},
     rules: [spam_demotion]}
""").profiles["default"]
    pipeline = load_bytes(SEED_CONFIG).profiles["default"]
    bare = Pipeline("bare", [(Phase.PRE_FILTER, [Step(make(SafeSearch))])])
    banlist = seed_ctx().banlist
    runs = [
        pipeline.run(seed_page(), seed_ctx()),
        *(gated.run(seed_page(), Context(banlist=banlist, input_count=5, now=1.0,
                                         variants={"antispam_v7": variant}))
          for variant in ("control", "treatment")),
        pipeline.run([doc("x", 2.0, adult_score=0.6), doc("y", 1.0, adult_score=0.7)],
                     Context(age_mode="strict", input_count=2)),  # relaxed and rerun
        pipeline.run([doc("x", adult_score=0.95)], Context(age_mode="strict", input_count=1)),
        bare.run([doc("x", adult_score=0.95)], Context(input_count=1)),  # the runner's own
    ]
    key = attrgetter("rule", "phase", "action", "mode")
    for out in runs:
        assert out.actions == Counter(map(key, out.audit))
    assert {k[3] for k in runs[1].actions} == {APPLIED, SHADOW}
    assert ("sort", Phase.RERANK, "move", APPLIED) in runs[2].actions
    assert ("pipeline", Phase.POST_FILTER, "fallback", APPLIED) in runs[5].actions


def test_run_is_deterministic_for_a_fixed_context():
    pipeline = load_bytes(SEED_CONFIG).profiles["default"]
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
    without = load_bytes(SEED_CONFIG.replace(b"rerank: [spam_demotion]", b"rerank: []")
                         ).profiles["default"]
    with_exp = load_bytes(SEED_CONFIG + EXPERIMENT).profiles["default"]
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
    pipeline = load_bytes(SEED_CONFIG + EXPERIMENT).profiles["default"]
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


def test_shadow_measures_what_the_rule_would_have_done_without_touching_the_page():
    pipeline = load_bytes(SEED_CONFIG + EXPERIMENT).profiles["default"]
    base = seed_ctx()
    page = seed_page()
    ctx = Context(banlist=base.banlist, input_count=5, now=1.0,
                  variants={"antispam_v7": "control"})
    out = pipeline.run(page, ctx)
    timing = next(t for t in out.timings if t.rule == "spam_demotion")
    assert timing.mode == SHADOW
    # after the banlist: [A, B, C, E]; demoting B to 4.0 would sort it [A, C, E, B]:
    # C and E up one, B down two. The applied page keeps B second.
    assert sorted(timing.moves) == [-1, -1, 2] and timing.churn == 0
    assert ids(out.docs) == ["A", "B", "E"] and out.docs[1].score == 9.0
    treated = pipeline.run(seed_page(), Context(banlist=base.banlist, input_count=5, now=1.0,
                                                variants={"antispam_v7": "treatment"}))
    applied = next(t for t in treated.timings if t.rule == "spam_demotion")
    assert applied.mode == APPLIED and sorted(applied.moves) == [-1, -1, 2]
    banlist = next(t for t in out.timings if t.rule == "banlist")
    assert banlist.moves == (-1,) and banlist.churn == 0  # E moved up from 5th to 4th


def test_a_rule_after_a_shadow_rule_is_measured_on_the_page_it_was_given():
    """The runner keeps each page's sort for the next rescoring rule; a shadow rule's output
    is dropped, so the rule after it must be judged as if the shadow rule had not run."""
    rerank = b"    rerank: [spam_demotion]"
    both = SEED_CONFIG.replace(rerank, b"    rerank: [spam_demotion, sandbox_damping]")
    alone = SEED_CONFIG.replace(rerank, b"    rerank: [sandbox_damping]")
    page = [doc("A", 10.0, position=1), doc("B", 9.0, spam_score=0.9, position=2),
            doc("C", 8.0, position=3, domain_age_days=30.0), doc("D", 7.0, position=4),
            doc("E", 6.0, position=5)]
    base = seed_ctx()
    ctx = Context(banlist=base.banlist, input_count=5, now=1.0,
                  variants={"antispam_v7": "control"})
    shadowed = load_bytes(both + EXPERIMENT).profiles["default"].run(page, ctx)
    only = load_bytes(alone).profiles["default"].run(page, ctx)
    spam = next(t for t in shadowed.timings if t.rule == "spam_demotion")
    assert spam.mode == SHADOW and spam.moves  # B would have dropped below C and D
    sandbox = next(t for t in shadowed.timings if t.rule == "sandbox_damping")
    expected = next(t for t in only.timings if t.rule == "sandbox_damping")
    # C: 8.0 -> 5.0 goes below D and E, who move up one each
    assert sorted(sandbox.moves) == sorted(expected.moves) == [-1, -1, 2]
    assert sandbox.churn == expected.churn == 0
    assert ids(shadowed.docs) == ids(only.docs)


def test_optional_rules_are_skipped_past_the_deadline_and_reported():
    config = SEED_CONFIG.replace(b"    diversify: [{host_crowding: {max_per_host: 1}}]",
                                 b"    diversify: [{host_crowding: {max_per_host: 1}}, "
                                 b"near_duplicates]")
    pipeline = load_bytes(config).profiles["default"]
    page = [doc("A", 2.0, text="one two three four five six seven eight nine ten"),
            doc("B", 1.0, text="one two three four five six seven eight nine ten")]
    on_time = pipeline.run(page, Context(input_count=2, deadline=None))
    assert ids(on_time.docs) == ["A"] and on_time.skipped == []
    late = pipeline.run(page, Context(input_count=2, deadline=0.0))  # already past
    assert ids(late.docs) == ["A", "B"]
    assert late.skipped == [{"rule": "near_duplicates", "phase": "diversify",
                             "reason": "deadline"}]
    assert all(t.rule != "near_duplicates" for t in late.timings)  # not run at all


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
    pipeline = load_bytes(NEAR_DUPLICATES_ONLY % method.encode()).profiles["default"]
    page = template_page()
    counted = Ticking()
    done = pipeline.run(page, Context(input_count=4, deadline=1e9, clock=counted))
    assert ids(done.docs) == ["omsk", "returns"] and done.skipped == []
    checks = counted.reads - 2  # the runner reads the clock as the rule starts and ends
    assert checks >= 4  # at least one per text
    for passed_at in range(1, checks + 1):  # the check at this read finds the deadline passed
        late = pipeline.run(page, Context(input_count=4, deadline=passed_at - 0.5,
                                          clock=Ticking()))
        assert late.docs == page and late.audit == [] and late.actions == {}
        assert late.skipped == [{"rule": "near_duplicates", "phase": "diversify",
                                 "reason": "deadline (stopped while running)"}]
        [timing] = late.timings  # its time is still measured: from read 0 to the one after
        assert (timing.rule, timing.seconds, timing.records) == (
            "near_duplicates", passed_at + 1, ())
    on_time = pipeline.run(page, Context(input_count=4, deadline=checks + 0.5,
                                         clock=Ticking()))  # the last check is on time
    assert ids(on_time.docs) == ["omsk", "returns"] and on_time.skipped == []
    assert [r.doc_id for r in on_time.audit] == ["kazan", "perm"]
