"""near_duplicates at scale, through the engine: the exact/MinHash switch,
precomputed signatures, the caches, the deadline."""
from __future__ import annotations

import pytest

from app.config.load import load_bytes
from app.errors import ConfigError
from app.neardup import shingles
from tests.corpus import corpus
from tests.minhash_reference import signature as reference_signature
from tests.neardup.test_shingles import KAZAN, OMSK, PERM, RETURNS
from tests.sides import document as doc
from tests.sides import only

SEED_PAGES = [("kazan", KAZAN), ("perm", PERM), ("omsk", OMSK), ("returns", RETURNS)]
OMSK_FIRST = [SEED_PAGES[2], SEED_PAGES[0], SEED_PAGES[1], SEED_PAGES[3]]
MINHASH = "(MinHash estimate, k=128); collapsed under it"


def config(**params) -> str:
    return only("diversify", {"near_duplicates": params})


def sent(text: str, k: int = 128, seed: int = 1, width: int = 10) -> dict:
    """What an upstream indexer sends, computed by the plain-Python reference."""
    return reference_signature(text, k, seed, width)


def texts(pages) -> list[dict]:
    return [doc(name, text=text) for name, text in pages]


def reasons(answer) -> list[str]:
    return [r["reason"] for r in answer.records("near_duplicates")]


def collapsed(answer) -> list[list[str]]:
    return [[c["id"] for c in d["collapsed"]] for d in answer.documents]


def test_seed_situation_exact(side):
    # Perm differs by one word (containment 0.83 both ways); 0.52 of Omsk lies inside
    # Kazan's page, so it folds by containment, while its Jaccard (0.47) stays under 0.5.
    out = side.rerank(config(method="exact"), texts(SEED_PAGES))
    assert out.ids() == ["kazan", "returns"] and collapsed(out)[0] == ["perm", "omsk"]
    assert reasons(out) == ["containment 0.83 >= 0.5 with kazan; collapsed under it",
                            "containment 0.52 >= 0.5 with kazan; collapsed under it"]
    out = side.rerank(config(method="exact", measure="jaccard"), texts(SEED_PAGES))
    assert out.ids() == ["kazan", "omsk", "returns"]


def test_seed_situation_minhash(side):
    """Omsk ranked first: 0.83 of Kazan and of Perm lie inside it, far from the threshold."""
    out = side.rerank(config(method="minhash"), texts(OMSK_FIRST))
    assert out.ids() == ["omsk", "returns"] and collapsed(out)[0] == ["kazan", "perm"]
    for reason in reasons(out):
        assert abs(float(reason.split()[1]) - 0.83) <= 0.25  # the stated error (test_minhash)
        assert reason.endswith(f"with omsk {MINHASH}")


def test_auto_switches_on_document_count_and_on_signatures(side):
    def method(answer) -> str:
        return "minhash" if reasons(answer)[0].endswith(MINHASH) else "exact"

    loaded = side.load(config(exact_max_docs=3))
    assert method(loaded.rerank(texts(SEED_PAGES[:3]))) == "exact"
    assert method(loaded.rerank(texts(SEED_PAGES))) == "minhash"
    with_signature = [doc("kazan", minhash=sent(KAZAN)), doc("perm", text=PERM)]
    assert method(loaded.rerank(with_signature)) == "minhash"
    forced = side.rerank(config(method="exact", exact_max_docs=0), texts(SEED_PAGES))
    assert method(forced) == "exact"


def test_precomputed_signatures_without_text_collapse_like_texts(side):
    docs = [doc(name, minhash=sent(text)) for name, text in OMSK_FIRST]
    docs.append(doc("plain", text=KAZAN))  # text only: signed here, the same family
    loaded = side.load(config(method="minhash", cache_mb=0))
    out = loaded.rerank(docs)
    assert out.ids() == ["omsk", "returns"]
    assert collapsed(out)[0] == ["kazan", "perm", "plain"]
    assert reasons(out)[:2] == reasons(loaded.rerank(texts(OMSK_FIRST)))


def test_an_empty_signature_matches_nothing(side):
    out = side.rerank(config(), [doc("a", minhash=sent("")), doc("b", minhash=sent(""))])
    assert out.ids() == ["a", "b"] and out.records() == []


@pytest.mark.parametrize(("change", "field", "problem"), [
    ({"k": 64}, "documents[1].minhash.values",
     "64 values, but this profile's near_duplicates compares k=128 (num_perm)"),
    ({"width": 5}, "documents[1].minhash.width",
     "shingles of 5 words, but this profile's near_duplicates uses 10 (shingle_words)"),
    ({"seed": 2}, "documents[1].minhash.seed",
     "family seed 2, but this profile's near_duplicates uses 1"),
])
def test_incompatible_signature_is_refused_naming_the_field(side, change, field, problem):
    docs = [doc("a", text=KAZAN), doc("b", minhash=sent(PERM, **change))]
    out = side.rerank(config(), docs)
    assert (out.status, out.body["field"], out.body["problem"]) == (422, field, problem)


def test_cache_hits_on_the_second_page_and_results_do_not_change(side):
    docs = [doc(f"d{i}", text=t) for i, (_, t) in enumerate(corpus(60, seed=4))]
    distinct = len({d["text"] for d in docs})
    assert distinct < 60  # some template copies are verbatim: one cache entry each
    loaded = side.load(config())  # 60 documents with text: above exact_max_docs, MinHash
    first = loaded.rerank(docs)
    assert loaded.cache_stats() == [("default", "signature", 0, 60, 0, distinct),
                                    ("default", "shingle", 0, 0, 0, 0)]
    second = loaded.rerank(docs)
    assert loaded.cache_stats()[0][2:4] == (60, 60)
    assert first.ids() == second.ids() and reasons(first) == reasons(second) != []


def test_minhash_folds_agree_with_exact_values_within_the_stated_error(side):
    docs = [doc(f"d{i}", text=t) for i, (_, t) in enumerate(corpus(80, seed=9))]
    sets = {d["id"]: shingles.shingles(d["text"]) for d in docs}
    exact = side.rerank(config(method="exact"), docs).records()
    approx = side.rerank(config(method="minhash"), docs).records()
    assert len(approx) > 10
    for rec in approx:  # every MinHash fold is a real near-duplicate
        leader = rec["reason"].split(" with ")[1].split()[0]
        assert shingles.containment(sets[rec["doc_id"]], sets[leader]) >= 0.5 - 0.25
    folded_by_minhash = {r["doc_id"] for r in approx}
    for rec in exact:  # and every clear exact fold is found by MinHash too
        if float(rec["reason"].split()[1]) >= 0.5 + 0.25:
            assert rec["doc_id"] in folded_by_minhash


@pytest.mark.parametrize(("params", "problem"), [
    ("{method: fuzzy}", "method: must be auto, exact or minhash"),
    ("{num_perm: 8}", "num_perm: 8 is outside [16, 1024]"),
    ("{cache_mb: -1}", "cache_mb: invalid value: integer `-1`"),
    ("{exact_cache_mb: 70000}", "exact_cache_mb: 70000 is outside [0, 65536]"),
    ("{band_rows: 4}", "band_rows: unknown field `band_rows`"),
])
def test_config_refuses_bad_parameters_naming_them(params, problem):
    raw = f"profiles:\n  default:\n    diversify: [{{near_duplicates: {params}}}]\n".encode()
    with pytest.raises(ConfigError) as err:
        load_bytes(raw)
    assert "profiles.default.diversify[0] near_duplicates" in str(err.value)
    assert problem in str(err.value)


TWO_PROFILES = """
profiles:
  default:
    diversify: [{near_duplicates: {cache_mb: %d, exact_cache_mb: %d}}]
  other:
    extends: default
"""


def test_each_profile_rule_gets_its_own_caches_and_zero_turns_one_off(side):
    loaded = side.load(TWO_PROFILES % (1, 1))
    loaded.rerank(texts(SEED_PAGES))  # exact: the shingle-set cache
    assert loaded.cache_stats() == [
        ("default", "signature", 0, 0, 0, 0), ("default", "shingle", 0, 4, 0, 4),
        ("other", "signature", 0, 0, 0, 0), ("other", "shingle", 0, 0, 0, 0)]
    assert [s[:2] for s in side.load(TWO_PROFILES % (0, 1)).cache_stats()] == [
        ("default", "shingle"), ("other", "shingle")]
    assert [s[:2] for s in side.load(TWO_PROFILES % (1, 0)).cache_stats()] == [
        ("default", "signature"), ("other", "signature")]


def test_a_variant_with_its_own_parameters_has_its_own_caches(side):
    raw = ("profiles:\n  default:\n    diversify: [{near_duplicates: {cache_mb: 1}}]\n"
           "experiments:\n  - name: nd\n    unit: user_id\n    rules: [near_duplicates]\n"
           "    variants:\n      control: 50\n"
           "      strict: {weight: 50, params: {near_duplicates: {threshold: 0.8}}}\n")
    loaded = side.load(raw)
    loaded.rerank(texts(SEED_PAGES), variants={"nd": "strict"}, unit={"user_id": "u"})
    stats = loaded.cache_stats()
    assert [s[:2] for s in stats] == [("default", "signature"), ("default", "shingle")] * 2
    assert [s[5] for s in stats] == [0, 0, 0, 4]  # the variant's rule shingled the page


def test_exact_sets_come_from_their_cache_on_the_next_page_with_the_same_results(side):
    docs = [doc(f"d{i}", text=t) for i, (_, t) in enumerate(corpus(25, seed=9))]
    distinct = len({d["text"] for d in docs})  # 25 documents with text: the exact method
    assert distinct < 25  # verbatim template copies: the page's own repeats hit already
    cached, uncached = side.load(config()), side.load(config(exact_cache_mb=0))
    first = cached.rerank(docs)
    assert cached.cache_stats()[1] == ("default", "shingle", 25 - distinct, distinct, 0,
                                       distinct)
    second = cached.rerank(docs[::-1])  # another page of the same texts
    assert cached.cache_stats()[1][2:4] == (50 - distinct, distinct)
    for page, out in ((docs, first), (docs[::-1], second)):
        plain = uncached.rerank(page)
        assert out.ids() == plain.ids() and reasons(out) == reasons(plain) != []
    assert cached.cache_stats()[0][2:4] == (0, 0)  # no signature was needed


# --- the request's deadline -----------------------------------------------------------
STOPPED = [{"rule": "near_duplicates", "phase": "diversify", "reason": "deadline"}]


def test_signatures_made_before_the_deadline_stay_cached_for_the_next_page(side):
    loaded = side.load(config(method="minhash"))
    # The runner reads the clock once before the rule starts (read 0), the rule once per
    # text it signs: reads 1 and 2 are on time, read 3 is past the deadline.
    late = loaded.rerank(texts(OMSK_FIRST), deadline_after=3)
    assert late.body["skipped"] == STOPPED and late.ids() == [n for n, _ in OMSK_FIRST]
    assert loaded.cache_stats()[0][5] == 2
    out = loaded.rerank(texts(OMSK_FIRST))
    assert loaded.cache_stats()[0][2::3] == (2, 4)  # hits, entries
    assert out.ids() == ["omsk", "returns"] and len(out.records()) == 2


def test_shingle_sets_made_before_the_deadline_stay_cached_for_the_next_page(side):
    loaded = side.load(config(method="exact"))
    late = loaded.rerank(texts(SEED_PAGES), deadline_after=4)  # three texts shingled
    assert late.body["skipped"] == STOPPED
    assert loaded.cache_stats()[1][5] == 3
    out = loaded.rerank(texts(SEED_PAGES))
    assert loaded.cache_stats()[1][2] == 3 and out.ids() == ["kazan", "returns"]


def test_with_precomputed_signatures_the_deadline_still_stops_the_comparisons(side):
    # Nothing to sign: every clock read of the rule is while comparing (many equal
    # signatures take one pass per distance, then the matching pairs are folded).
    docs = [doc(f"d{i}", minhash=sent(KAZAN)) for i in range(40)]
    loaded = side.load(config(cache_mb=0))
    out = loaded.rerank(docs, deadline_after=10**9)
    assert out.ids() == ["d0"] and len(out.records()) == 39
    late = loaded.rerank(docs, deadline_after=1)
    assert late.body["skipped"] == STOPPED and len(late.ids()) == 40
