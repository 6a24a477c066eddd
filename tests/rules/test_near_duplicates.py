"""near_duplicates at scale: the exact/MinHash switch, precomputed signatures, the cache."""
from __future__ import annotations

import pytest

from app import shingles
from app.config import load_bytes
from app.contract import MinHash
from app.errors import ConfigError, FieldError
from tests.corpus import corpus
from tests.helpers import Ticking, ctx, doc, ids, make
from tests.minhash_reference import signature as reference_signature
from tests.reference.errors import DeadlineExceeded
from tests.reference.rules.diversity import NearDuplicates
from tests.reference.service import Service
from tests.reference.sigcache import ENTRY_OVERHEAD
from tests.test_shingles import KAZAN, OMSK, PERM, RETURNS

SEED_PAGES = [("kazan", KAZAN), ("perm", PERM), ("omsk", OMSK), ("returns", RETURNS)]


def seed_docs(**fields):
    return [doc(name, position=n, text=text, **fields)
            for n, (name, text) in enumerate(SEED_PAGES, 1)]


def sent(text: str, k: int = 128, seed: int = 1, width: int = 10) -> MinHash:
    """What an upstream indexer sends, computed by the plain-Python reference."""
    return MinHash(**reference_signature(text, k, seed, width))


def test_seed_situation_exact():
    # Perm differs by one word (containment 0.83 both ways); 0.52 of Omsk lies inside
    # Kazan's page, so it folds by containment, while its Jaccard (0.47) stays under 0.5.
    out, records = make(NearDuplicates, method="exact")(seed_docs(), ctx())
    assert ids(out) == ["kazan", "returns"]
    assert [c["id"] for c in out[0].collapsed] == ["perm", "omsk"]
    assert [r.reason for r in records] == [
        "containment 0.83 >= 0.5 with kazan; collapsed under it",
        "containment 0.52 >= 0.5 with kazan; collapsed under it"]
    out, _ = make(NearDuplicates, method="exact", measure="jaccard")(seed_docs(), ctx())
    assert ids(out) == ["kazan", "omsk", "returns"]


def omsk_first(**fields):
    """Omsk ranked first: 0.83 of Kazan and of Perm lie inside it, far from the threshold."""
    order = [SEED_PAGES[2], SEED_PAGES[0], SEED_PAGES[1], SEED_PAGES[3]]
    return [doc(name, position=n, **{key: make_value(text) for key, make_value in
                                     fields.items()})
            for n, (name, text) in enumerate(order, 1)]


def test_seed_situation_minhash():
    out, records = make(NearDuplicates, method="minhash")(omsk_first(text=str), ctx())
    assert ids(out) == ["omsk", "returns"]
    assert [c["id"] for c in out[0].collapsed] == ["kazan", "perm"]
    for rec in records:
        value = float(rec.reason.split()[1])
        assert abs(value - 0.83) <= 0.25  # the stated containment error (test_minhash.py)
        assert "with omsk (MinHash estimate, k=128); collapsed under it" in rec.reason


def test_auto_switches_on_document_count_and_on_signatures():
    rule = make(NearDuplicates, exact_max_docs=3)
    docs = seed_docs()
    assert rule.method_for(docs[:3]) == "exact"
    assert rule.method_for(docs) == "minhash"
    with_sig = [docs[0].replace(signature=sent(KAZAN)), docs[1]]
    assert rule.method_for(with_sig) == "minhash"
    assert make(NearDuplicates, method="exact", exact_max_docs=0).method_for(docs) == "exact"


def test_precomputed_signatures_without_text_collapse_like_texts():
    docs = omsk_first(signature=sent)
    docs.append(doc("plain", position=5, text=KAZAN))  # text only: computed here, same family
    rule = make(NearDuplicates, method="minhash", cache_mb=0)
    out, records = rule(docs, ctx())
    assert ids(out) == ["omsk", "returns"]
    assert [c["id"] for c in out[0].collapsed] == ["kazan", "perm", "plain"]
    from_text, text_records = rule(omsk_first(text=str), ctx())
    assert [r.reason for r in records[:2]] == [r.reason for r in text_records]


def test_an_empty_signature_matches_nothing():
    docs = [doc("a", position=1, signature=sent("")), doc("b", position=2, signature=sent(""))]
    assert make(NearDuplicates)(docs, ctx()) == (docs, [])


@pytest.mark.parametrize("change, field", [
    ({"k": 64}, "documents[1].minhash.values"),
    ({"width": 5}, "documents[1].minhash.width"),
    ({"seed": 2}, "documents[1].minhash.seed"),
])
def test_incompatible_signature_is_refused_naming_the_field(change, field):
    docs = [doc("a", position=1, text=KAZAN), doc("b", position=2, signature=sent(PERM, **change))]
    with pytest.raises(FieldError) as err:
        make(NearDuplicates)(docs, ctx())
    assert err.value.field == field and err.value.status == 422


def test_cache_hits_on_the_second_page_and_results_do_not_change():
    texts = corpus(60, seed=4)
    docs = [doc(f"d{i}", position=i + 1, text=t) for i, (_, t) in enumerate(texts)]
    rule = make(NearDuplicates)  # 60 documents with text: above exact_max_docs, MinHash
    distinct = len({t for _, t in texts})
    assert distinct < 60  # some template copies are verbatim: one cache entry each
    first = rule(docs, ctx())
    assert (rule.cache.hits, rule.cache.misses, len(rule.cache)) == (0, 60, distinct)
    second = rule(docs, ctx())
    assert (rule.cache.hits, rule.cache.misses) == (60, 60)
    assert ids(first[0]) == ids(second[0]) and len(first[1]) == len(second[1]) > 0
    assert [r.reason for r in first[1]] == [r.reason for r in second[1]]


def test_minhash_folds_agree_with_exact_values_within_the_stated_error():
    texts = corpus(80, seed=9)
    docs = [doc(f"d{i}", position=i + 1, text=t) for i, (_, t) in enumerate(texts)]
    sets = {d.id: shingles.shingles(d.text) for d in docs}
    exact, exact_records = make(NearDuplicates, method="exact")(docs, ctx())
    approx, approx_records = make(NearDuplicates, method="minhash")(docs, ctx())
    assert len(approx_records) > 10
    for rec in approx_records:  # every MinHash fold is a real near-duplicate
        leader = rec.reason.split(" with ")[1].split()[0]
        assert shingles.containment(sets[rec.doc_id], sets[leader]) >= 0.5 - 0.25
    folded_by_minhash = {r.doc_id for r in approx_records}
    for rec in exact_records:  # and every clear exact fold is found by MinHash too
        if float(rec.reason.split()[1]) >= 0.5 + 0.25:
            assert rec.doc_id in folded_by_minhash


@pytest.mark.parametrize(("params", "problem"), [
    ("{method: fuzzy}", "parameter 'method'"),
    ("{num_perm: 8}", "parameter 'num_perm'"),
    ("{cache_mb: -1}", "parameter 'cache_mb'"),
    ("{band_rows: 4}", "unknown parameter 'band_rows'"),
])
def test_config_refuses_bad_parameters_naming_them(params, problem):
    raw = f"profiles:\n  default:\n    diversify: [{{near_duplicates: {params}}}]\n".encode()
    with pytest.raises(ConfigError) as err:
        load_bytes(raw)
    assert "profiles.default.diversify[0] near_duplicates" in str(err.value)
    assert problem in str(err.value)


def test_each_profile_rule_gets_its_own_cache_sized_from_the_config():
    raw = (b"profiles:\n  default:\n    diversify: [{near_duplicates: {cache_mb: 1, num_perm: 64}}]"
           b"\n  other:\n    extends: default\n")
    engine = load_bytes(raw)
    caches = dict(Service(engine).caches("signature"))
    assert set(caches) == {"default", "other"} and caches["default"] is not caches["other"]
    assert caches["default"].k == 64
    assert caches["default"].capacity == (1 << 20) // (64 * 8 + 8 + ENTRY_OVERHEAD)
    off = load_bytes(b"profiles:\n  default:\n    diversify: [{near_duplicates: {cache_mb: 0}}]\n")
    assert dict(Service(off).caches("signature")) == {}


def test_a_variant_with_its_own_parameters_has_its_own_cache_in_metrics():
    raw = (b"profiles:\n  default:\n    diversify: [{near_duplicates: {cache_mb: 1}}]\n"
           b"experiments:\n  - name: nd\n    unit: user_id\n    rules: [near_duplicates]\n"
           b"    variants:\n      control: 50\n"
           b"      strict: {weight: 50, params: {near_duplicates: {threshold: 0.8}}}\n")
    caches = [cache for _, cache in Service(load_bytes(raw)).caches("signature")]
    assert len(caches) == 2 and caches[0] is not caches[1]


def test_exact_sets_come_from_their_cache_on_the_next_page_with_the_same_results():
    texts = corpus(25, seed=9)  # 25 documents with text: the exact method
    docs = [doc(f"d{i}", position=i + 1, text=t) for i, (_, t) in enumerate(texts)]
    cached, uncached = make(NearDuplicates), make(NearDuplicates, exact_cache_mb=0)
    assert cached.method_for(docs) == "exact" and uncached.exact_cache is None
    distinct = len({t for _, t in texts})
    assert distinct < 25  # verbatim template copies: the page's own repeats hit already
    first = cached(docs, ctx())
    assert (cached.exact_cache.hits, cached.exact_cache.misses) == (25 - distinct, distinct)
    assert len(cached.exact_cache) == distinct
    second = cached(list(reversed(docs)), ctx())  # another page of the same texts
    assert (cached.exact_cache.hits, cached.exact_cache.misses) == (50 - distinct, distinct)
    for page, out in ((docs, first), (list(reversed(docs)), second)):
        plain = uncached(page, ctx())
        assert ids(out[0]) == ids(plain[0]) and len(out[1]) > 0
        assert [r.reason for r in out[1]] == [r.reason for r in plain[1]]
    assert cached.cache.hits == cached.cache.misses == 0  # no signature was needed


def test_each_rule_gets_its_own_shingle_cache_and_zero_turns_it_off():
    raw = (b"profiles:\n  default:\n    diversify: [{near_duplicates: {exact_cache_mb: 1}}]"
           b"\n  other:\n    extends: default\n")
    caches = dict(Service(load_bytes(raw)).caches("shingle"))
    assert set(caches) == {"default", "other"} and caches["default"] is not caches["other"]
    assert caches["default"].max_bytes == 1 << 20 and caches["default"].width == 10
    off = b"profiles:\n  default:\n    diversify: [{near_duplicates: {exact_cache_mb: 0}}]\n"
    assert dict(Service(load_bytes(off)).caches("shingle")) == {}
    with pytest.raises(ConfigError, match="exact_cache_mb"):
        load_bytes(b"profiles:\n  default:\n    diversify: "
                   b"[{near_duplicates: {exact_cache_mb: -1}}]\n")


# --- the request's deadline -----------------------------------------------------------


def test_signatures_made_before_the_deadline_stay_cached_for_the_next_page():
    rule = make(NearDuplicates, method="minhash")
    page = omsk_first(text=str)
    # One clock read per text signed: reads 0 and 1 are on time, read 2 is past 1.5.
    with pytest.raises(DeadlineExceeded):
        rule(page, ctx(deadline=1.5, clock=Ticking()))
    assert len(rule.cache) == 2
    out, records = rule(page, ctx())
    assert (rule.cache.hits, len(rule.cache)) == (2, 4)
    assert ids(out) == ["omsk", "returns"] and len(records) == 2


def test_shingle_sets_made_before_the_deadline_stay_cached_for_the_next_page():
    rule = make(NearDuplicates, method="exact")
    with pytest.raises(DeadlineExceeded):
        rule(seed_docs(), ctx(deadline=2.5, clock=Ticking()))
    assert len(rule.exact_cache) == 3
    out, _ = rule(seed_docs(), ctx())
    assert rule.exact_cache.hits == 3 and ids(out) == ["kazan", "returns"]


def test_with_precomputed_signatures_the_deadline_still_stops_the_comparisons():
    # Nothing to sign: every clock read is while comparing (many equal signatures take
    # one pass per distance, then the matching pairs are folded).
    docs = [doc(f"d{i}", position=i + 1, signature=sent(KAZAN)) for i in range(40)]
    rule = make(NearDuplicates, cache_mb=0)
    out, records = rule(docs, ctx(deadline=1e9, clock=Ticking()))
    assert ids(out) == ["d0"] and len(records) == 39
    with pytest.raises(DeadlineExceeded):
        rule(docs, ctx(deadline=0.5, clock=Ticking()))
