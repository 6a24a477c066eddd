"""The engine's near-duplicate matching against the Python it replaces (tests/reference/).

Words, shingle hashes, signatures and content keys must be bit-identical; the pairs of a
page, their values (as floats, not approximately), the method, the deadline checks, the
cache counters and the refusals must be those of the Python rule, on random pages of a
small vocabulary (so that near-duplicates occur) and random parameters.
"""
from __future__ import annotations

import json
import pathlib
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import _engine
from app.api.contract import MinHash
from app.errors import FieldError
from app.neardup import minhash, shingles
from tests.data.gen_word_tables import tables
from tests.helpers import Ticking, ctx, doc, make
from tests.minhash_reference import signature as reference_signature
from tests.neardup.test_shingles import KAZAN, OMSK, PERM, RETURNS
from tests.reference.errors import DeadlineExceeded
from tests.reference.rules.diversity import NearDuplicates
from tests.reference.sigcache import SignatureCache, content_key

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLES = ROOT / "crates/engine/src/neardup/tables.rs"

# Words whose lowercasing or \w-splitting is special: final sigma, İ (lowers to i + a
# combining mark \w does not match), ß, digits of other scripts, marks, underscores.
VOCAB = ["доставка", "Курьер", "ЗАКАЗ", "быстро", "и", "в", "ГОРОД", "ΟΔΟΣ", "Σίσυφος",
         "İstanbul", "Straße", "café", "cafe\u0301", "x_y", "3", "٣", "नमस्ते", "день"]
SEPARATORS = [" ", ", ", ". ", " — ", "\n", "! ", "-"]


def test_the_unicode_tables_are_those_of_this_python():
    # A Python with another Unicode database must regenerate them (see the generator).
    assert TABLES.read_text() == tables(), (
        "python -m tests.data.gen_word_tables > crates/engine/src/neardup/tables.rs")


def test_every_character_lowers_and_splits_as_in_python():
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for sep in ("", " ", "Σ", "AΣ"):  # each alone, in runs, and beside a capital sigma
        text = sep.join(chars)
        assert _engine.neardup_words(text) == shingles.words(text)


# Lone surrogates are left out: a request carrying one is refused before any rule runs.
CHARS = st.characters(exclude_categories=["Cs"])


@settings(max_examples=300)
@given(st.text(st.sampled_from(list("AaΣσς İı'.\u0301\u00ad_9 ·\u02b0ΑΒ")) | CHARS,
               max_size=40))
def test_words_match_python(text):
    assert _engine.neardup_words(text) == shingles.words(text)


def texts(max_words: int = 25) -> st.SearchStrategy[str]:
    word = st.sampled_from(VOCAB)
    return st.lists(st.tuples(word, st.sampled_from(SEPARATORS)), max_size=max_words).map(
        lambda parts: "".join(w + s for w, s in parts))


@settings(max_examples=200)
@given(texts() | st.text(CHARS, max_size=60), st.integers(1, 12))
def test_shingle_hashes_and_content_keys_match_python(text, width):
    assert _engine.shingle_hashes(text, width) == sorted(shingles.shingles(text, width))
    assert _engine.neardup_content_key(text) == content_key(text)


@settings(max_examples=100)
@given(texts(), st.integers(1, 6), st.sampled_from([1, 16, 128, 300]), st.integers(0, 2**64 - 1))
def test_signatures_match_python(text, width, k, seed):
    sig = minhash.signature(shingles.shingles(text, width), k, seed)
    assert _engine.minhash_signature(text, width, k, seed) == (sig.values.tolist(), sig.shingles)


def test_the_published_vectors():
    vectors = json.loads((ROOT / "tests/data/minhash_vectors.json").read_text())
    for case in vectors["cases"]:
        assert _engine.minhash_signature(case["text"], case["width"], case["k"],
                                         case["seed"]) == (case["values"], case["shingles"])


# --- pages ----------------------------------------------------------------------------


@st.composite
def pages(draw):
    """(rule params, [(text, signature or None)]): texts varied from a few bases."""
    params = {
        "shingle_words": draw(st.integers(1, 5)),
        "measure": draw(st.sampled_from(["containment", "jaccard"])),
        "threshold": draw(st.sampled_from([0.5, 1.0, 1 / 3, 0.8]) | st.floats(0.01, 1.0)),
        "method": draw(st.sampled_from(["auto", "exact", "minhash"])),
        "exact_max_docs": draw(st.integers(0, 12)),
        "num_perm": draw(st.sampled_from([16, 32, 128])),
        "seed": draw(st.integers(0, 3)),
    }
    bases = draw(st.lists(st.lists(st.sampled_from(VOCAB), max_size=30), min_size=1,
                          max_size=3))
    docs = []
    for _ in range(draw(st.integers(0, 24))):
        kind = draw(st.sampled_from(["text"] * 6 + ["none", "empty", "signed", "both"]))
        words = list(draw(st.sampled_from(bases)))
        for _ in range(draw(st.integers(0, 3))):  # a few edits of the base
            at = draw(st.integers(0, len(words)))
            edit = draw(st.sampled_from(["insert", "delete", "replace"]))
            if edit == "insert" or not words:
                words.insert(at, draw(st.sampled_from(VOCAB)))
            elif edit == "delete":
                del words[min(at, len(words) - 1)]
            else:
                words[min(at, len(words) - 1)] = draw(st.sampled_from(VOCAB))
        text = draw(st.sampled_from(SEPARATORS)).join(words)
        sig = None
        if kind in ("signed", "both"):
            sig = reference_signature(text, params["num_perm"], params["seed"],
                                      params["shingle_words"])
        docs.append((None if kind in ("none", "signed") else "" if kind == "empty" else text,
                     sig))
    return params, docs


def as_docs(page):
    return [doc(f"d{n}", position=n + 1, text=text,
                signature=MinHash(**sig) if sig is not None else None)
            for n, (text, sig) in enumerate(page)]


def as_engine(page):
    return [(text, (sig["values"], sig["shingles"], sig["width"], sig["seed"])
             if sig is not None else None) for text, sig in page]


def matcher(params, cache_bytes=0, exact_cache_bytes=0):
    return _engine.NearDupMatcher(
        width=params["shingle_words"], measure=params["measure"],
        threshold=params["threshold"], method=params["method"],
        exact_max_docs=params["exact_max_docs"], num_perm=params["num_perm"],
        seed=params["seed"], cache_bytes=cache_bytes, exact_cache_bytes=exact_cache_bytes)


class Counting:
    """A check that raises after `budget` calls (None: never), counting them."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget, self.calls = budget, 0

    def __call__(self) -> None:
        self.calls += 1
        if self.budget is not None and self.calls > self.budget:
            raise DeadlineExceeded("the budget of checks ran out")


PAGE_SETTINGS = settings(max_examples=300, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])


@PAGE_SETTINGS
@given(pages())
def test_pairs_values_method_and_checks_match_the_rule(page):
    params, raw = page
    docs, engine_docs = as_docs(raw), as_engine(raw)
    rule = make(NearDuplicates, **params, cache_mb=0, exact_cache_mb=0)
    m = matcher(params)
    clock = Ticking()
    expected, method = rule.pairs(docs, ctx(deadline=1e18, clock=clock).check_deadline)
    check = Counting()
    got, used = m.pairs(engine_docs, check)
    assert (got, used) == (expected, method)  # values equal as floats
    assert check.calls == clock.reads
    # ... and the rule's own records are worded from them
    _, records = rule(docs, ctx())
    assert [r.reason for r in records] == [m.reason(v, docs[j].id, used) for _, j, v in got]
    assert [r.doc_id for r in records] == [docs[i].id for i, _, _ in got]


@PAGE_SETTINGS
@given(pages(), st.integers(0, 30))
def test_a_deadline_stops_both_at_the_same_check_and_leaves_the_same_caches(page, budget):
    params, raw = page
    docs, engine_docs = as_docs(raw), as_engine(raw)
    rule = make(NearDuplicates, **params, cache_mb=1, exact_cache_mb=1)
    m = matcher(params, cache_bytes=1 << 20, exact_cache_bytes=1 << 20)
    for _ in range(2):  # a second page of the same texts hits the caches
        try:
            expected = rule.pairs(docs, ctx(deadline=budget - 0.5,
                                                       clock=Ticking()).check_deadline)
        except DeadlineExceeded:
            expected = "stopped"
        try:
            got = m.pairs(engine_docs, Counting(budget))
        except DeadlineExceeded:
            got = "stopped"
        assert got == expected
        signature, shingle = m.cache_stats()
        assert (signature["hits"], signature["misses"], signature["entries"]) == (
            rule.cache.hits, rule.cache.misses, len(rule.cache))
        assert (shingle["hits"], shingle["misses"], shingle["entries"]) == (
            rule.exact_cache.hits, rule.exact_cache.misses, len(rule.exact_cache))


@settings(max_examples=100, deadline=None)
@given(pages(), st.integers(1, 6))
def test_signature_evictions_match_at_the_same_capacity(page, capacity):
    params, raw = page
    docs = as_docs(raw)
    k = params["num_perm"]
    # Python charges 16 bytes more per entry: this size gives both the same capacity.
    size = capacity * (k * 8 + 8 + 120)
    rule = make(NearDuplicates, **params, exact_cache_mb=0)
    rule.matcher.cache = SignatureCache(size, k)
    m = matcher(params, cache_bytes=size)
    for page_docs in (docs, docs[::-1], docs):
        engine_docs = as_engine([raw[d.original_position - 1] for d in page_docs])
        assert m.pairs(engine_docs)[0] == rule.pairs(page_docs, lambda: None)[0]
        signature, _ = m.cache_stats()
        assert (signature["hits"], signature["misses"], signature["evictions"],
                signature["entries"]) == (rule.cache.hits, rule.cache.misses,
                                          rule.cache.evictions, len(rule.cache))


@settings(max_examples=100, deadline=None)
@given(pages(), st.data())
def test_an_incompatible_signature_is_refused_as_the_rule_refuses_it(page, data):
    params, raw = page
    change = data.draw(st.sampled_from([{"k": 8}, {"width": 7}, {"seed": 9}]))
    at = data.draw(st.integers(0, len(raw)))
    text = data.draw(texts())
    bad = reference_signature(text, change.get("k", params["num_perm"]),
                              change.get("seed", params["seed"]),
                              change.get("width", params["shingle_words"]))
    raw = [*raw[:at], (data.draw(st.sampled_from([None, text])), bad), *raw[at:]]
    rule = make(NearDuplicates, **params, cache_mb=0, exact_cache_mb=0)
    try:
        rule(as_docs(raw), ctx())
        expected = None
    except FieldError as exc:
        expected = (exc.field, exc.problem)
    refused = matcher(params).refused(as_engine(raw))
    got = (None if refused is None else
           (f"documents[{refused[0]}].minhash.{refused[1]}", refused[2]))
    assert got == expected


@settings(max_examples=300)
@given(st.floats(0, 1), st.floats(1e-9, 1.0) | st.sampled_from([0.5, 1.0, 1e-5, 0.1 + 0.2]),
       st.sampled_from(["containment", "jaccard"]), st.sampled_from(["exact", "minhash"]))
def test_reasons_are_formatted_as_python_formats_them(value, threshold, measure, used):
    m = matcher({"shingle_words": 10, "measure": measure, "threshold": threshold,
                 "method": "auto", "exact_max_docs": 30, "num_perm": 64, "seed": 1})
    how = " (MinHash estimate, k=64)" if used == "minhash" else ""
    assert m.reason(value, "d7", used) == (
        f"{measure} {value:.2f} >= {threshold:g} with d7{how}; collapsed under it")


def test_the_seed_situation():
    # tests/rules/test_near_duplicates.py: Perm and Omsk fold under Kazan by containment
    page = [(KAZAN, None), (PERM, None), (OMSK, None), (RETURNS, None)]
    m = matcher({"shingle_words": 10, "measure": "containment", "threshold": 0.5,
                 "method": "exact", "exact_max_docs": 30, "num_perm": 128, "seed": 1})
    got, used = m.pairs(page)
    assert used == "exact" and [(i, j) for i, j, _ in got] == [(1, 0), (2, 0)]
    assert [m.reason(v, "kazan", used) for _, _, v in got] == [
        "containment 0.83 >= 0.5 with kazan; collapsed under it",
        "containment 0.52 >= 0.5 with kazan; collapsed under it"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
