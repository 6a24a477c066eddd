"""The engine's near-duplicate matching against independent oracles.

Shingle hashes and signatures must be bit-identical to app/neardup's (which
tests/neardup/test_minhash.py and test_shingles.py hold to a plain-Python MinHash and to
MurmurHash3); content keys are MurmurHash3 x64 128 of the UTF-8 (mmh3). The pairs of a
page are those of the fold written out below from the definitions (docs/near-duplicates.md:
each document, in rank order, folds under the first kept document above it whose
containment or Jaccard reaches the threshold; exact values from shingle sets, MinHash
estimates from signatures), on random pages of a small vocabulary (so that
near-duplicates occur) and random parameters.
"""
from __future__ import annotations

import json
import pathlib
import sys

import mmh3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import _engine
from app.neardup import minhash, shingles
from tests.data.gen_word_tables import tables
from tests.minhash_reference import signature as reference_signature
from tests.neardup.test_shingles import KAZAN, OMSK, PERM, RETURNS

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


def words_as_hashes(text: str) -> list[int]:
    """The words of `text` as the engine sees them: one-word shingles, hashed, sorted."""
    return sorted(shingles.shingles(text, 1))


def test_every_character_lowers_and_splits_as_in_python():
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for sep in ("", " ", "Σ", "AΣ"):  # each alone, in runs, and beside a capital sigma
        text = sep.join(chars)
        assert _engine.shingle_hashes(text, 1) == words_as_hashes(text)


# Lone surrogates are left out: a request carrying one is refused before any rule runs.
CHARS = st.characters(exclude_categories=["Cs"])


@settings(max_examples=300)
@given(st.text(st.sampled_from(list("AaΣσς İı'.\u0301\u00ad_9 ·\u02b0ΑΒ")) | CHARS,
               max_size=40))
def test_words_match_python(text):
    assert _engine.shingle_hashes(text, 1) == words_as_hashes(text)


def texts(max_words: int = 25) -> st.SearchStrategy[str]:
    word = st.sampled_from(VOCAB)
    return st.lists(st.tuples(word, st.sampled_from(SEPARATORS)), max_size=max_words).map(
        lambda parts: "".join(w + s for w, s in parts))


@settings(max_examples=200)
@given(texts() | st.text(CHARS, max_size=60), st.integers(1, 12))
def test_shingle_hashes_and_content_keys_match_python(text, width):
    assert _engine.shingle_hashes(text, width) == sorted(shingles.shingles(text, width))
    assert _engine.neardup_content_key(text) == mmh3.hash128(text.encode(), seed=0,
                                                             signed=False)


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


def as_engine(page):
    return [(text, (sig["values"], sig["shingles"], sig["width"], sig["seed"])
             if sig is not None else None) for text, sig in page]


def matcher(params, cache_bytes=0, exact_cache_bytes=0):
    return _engine.NearDupMatcher(
        width=params["shingle_words"], measure=params["measure"],
        threshold=params["threshold"], method=params["method"],
        exact_max_docs=params["exact_max_docs"], num_perm=params["num_perm"],
        seed=params["seed"], cache_bytes=cache_bytes, exact_cache_bytes=exact_cache_bytes)


# --- the oracle: the fold from its definition ----------------------------------------------

def method_for(params, page) -> str:
    """auto: MinHash when a signature was sent or the texts outnumber exact_max_docs."""
    if params["method"] != "auto":
        return params["method"]
    if any(sig is not None for _, sig in page):
        return "minhash"
    return "exact" if sum(1 for text, _ in page if text) <= params["exact_max_docs"] else "minhash"


def exact_value(measure: str, a: set[int], b: set[int]) -> float:
    """How much of `a` (the lower document's shingles) lies in `b`, or their Jaccard."""
    inter = len(a & b)
    return inter / len(a) if measure == "containment" else inter / len(a | b)


def minhash_value(measure: str, a: tuple[list[int], int], b: tuple[list[int], int]) -> float:
    """The MinHash estimate: Jaccard is the share of agreeing values; containment is
    |A ∩ B| = J (|A| + |B|) / (1 + J) over |A| (at most 1)."""
    (va, size_a), (vb, size_b) = a, b
    jac = sum(x == y for x, y in zip(va, vb, strict=True)) / len(va)
    if measure == "jaccard":
        return jac
    return min(jac * (size_a + size_b) / (1.0 + jac) / size_a, 1.0)


def expected_pairs(params, page) -> tuple[list[tuple[int, int, float]], str]:
    """(lower, leader, value) of each fold, and the method."""
    method = method_for(params, page)
    width, k, seed = params["shingle_words"], params["num_perm"], params["seed"]
    items: dict[int, object] = {}  # index -> shingle set or (values, size); none: matches nothing
    for n, (text, sig) in enumerate(page):
        if method == "exact":
            found = shingles.shingles(text, width) if text else set()
            if found:
                items[n] = set(found)
        elif sig is not None:
            if sig["shingles"]:
                items[n] = (sig["values"], sig["shingles"])
        elif text:
            computed = minhash.signature(shingles.shingles(text, width), k, seed)
            if computed.shingles:
                items[n] = (computed.values.tolist(), computed.shingles)
    value = exact_value if method == "exact" else minhash_value
    kept: list[int] = []
    folded = []
    for i, item in items.items():
        for j in kept:
            v = value(params["measure"], item, items[j])
            if v >= params["threshold"]:
                folded.append((i, j, v))
                break
        else:
            kept.append(i)
    return folded, method


class Stop(Exception):
    """The deadline's exception, raised by a check past its budget."""


class Counting:
    """A check that raises after `budget` calls (None: never), counting them."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget, self.calls = budget, 0

    def __call__(self) -> None:
        self.calls += 1
        if self.budget is not None and self.calls > self.budget:
            raise Stop


PAGE_SETTINGS = settings(max_examples=300, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])


@PAGE_SETTINGS
@given(pages())
def test_pairs_values_and_method_are_the_folds(page):
    params, raw = page
    got, used = matcher(params).pairs(as_engine(raw), Counting())
    expected, method = expected_pairs(params, raw)
    assert used == method
    assert got == expected  # values equal as floats


@PAGE_SETTINGS
@given(pages(), st.integers(0, 30))
def test_a_deadline_stops_the_work_and_what_was_cached_stays(page, budget):
    params, raw = page
    docs = as_engine(raw)
    m = matcher(params, cache_bytes=1 << 20, exact_cache_bytes=1 << 20)
    unbounded = Counting()
    want = matcher(params).pairs(docs, unbounded)
    try:
        got = m.pairs(docs, Counting(budget))
    except Stop:
        assert budget < unbounded.calls
        finished = False
    else:
        assert got == want
        finished = True
    before = [s["misses"] if s else 0 for s in m.cache_stats()]
    assert m.pairs(docs) == want  # what the cut run left in the caches changes nothing
    for stats, missed in zip(m.cache_stats(), before, strict=True):
        if stats is not None:
            assert stats["entries"] <= stats["misses"]
            if finished:  # every text is cached now: the second run computes none again
                assert stats["misses"] == missed


@settings(max_examples=100, deadline=None)
@given(pages(), st.integers(1, 6))
def test_a_small_signature_cache_changes_no_answer(page, capacity):
    """Evictions (crates/engine/src/neardup/cache.rs's unit tests: oldest first) only cost
    time: the pairs are those without a cache, the entries within the capacity."""
    params, raw = page
    m = matcher(params, cache_bytes=capacity * (params["num_perm"] * 8 + 8 + 104))
    for order in (raw, raw[::-1], raw):
        assert m.pairs(as_engine(order))[0] == matcher(params).pairs(as_engine(order))[0]
        signature, _ = m.cache_stats()
        assert signature["entries"] <= capacity
        assert signature["hits"] + signature["misses"] >= signature["entries"]


@settings(max_examples=100, deadline=None)
@given(pages(), st.data())
def test_an_incompatible_signature_is_refused_naming_its_field(page, data):
    params, raw = page
    change = data.draw(st.sampled_from([{"k": 8}, {"width": 7}, {"seed": 9}]))
    at = data.draw(st.integers(0, len(raw)))
    text = data.draw(texts())
    bad = reference_signature(text, change.get("k", params["num_perm"]),
                              change.get("seed", params["seed"]),
                              change.get("width", params["shingle_words"]))
    raw = [*raw[:at], (data.draw(st.sampled_from([None, text])), bad), *raw[at:]]
    refused = matcher(params).refused(as_engine(raw))
    compared = sum(1 for text, sig in raw if text or sig is not None)
    if method_for(params, raw) == "exact" or compared < 2:
        assert refused is None  # no signature is compared: none is refused
        return
    field = {"k": "values", "width": "width", "seed": "seed"}[next(iter(change))]
    # the first signature sent that this profile cannot compare: the drawn one, as the
    # page's own signatures are made with its parameters
    assert refused is not None and refused[:2] == (at, field)
    assert str(bad[{"values": "values", "width": "width", "seed": "seed"}[field]]
               if field != "values" else len(bad["values"])) in refused[2]


@settings(max_examples=300)
@given(st.floats(0, 1), st.floats(1e-9, 1.0) | st.sampled_from([0.5, 1.0, 1e-5, 0.1 + 0.2]),
       st.sampled_from(["containment", "jaccard"]), st.sampled_from(["exact", "minhash"]))
def test_reasons_are_formatted_as_documented(value, threshold, measure, used):
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
