"""The engine's near-duplicate matching against independent oracles, through what the
service uses: `NearDupSets` (the audit's shingle sets and signatures) and the
near_duplicates rule as a request runs it.

Shingle hashes and signatures must be bit-identical to app/neardup's (which
tests/neardup/test_minhash.py and test_shingles.py hold to a plain-Python MinHash and to
MurmurHash3); content keys are MurmurHash3 x64 128 of the UTF-8 (mmh3: the Rust unit test
in crates/engine/src/neardup/cache.rs reads tests/data/content_keys.json, checked here).
The rule's folds are those written out below from the definitions
(docs/near-duplicates.md: each document, in rank order, folds under the first kept
document above it whose containment or Jaccard reaches the threshold; exact values from
shingle sets, MinHash estimates from signatures), on random pages of a small vocabulary
(so that near-duplicates occur) and random parameters.
"""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app._engine import NearDupSets
from app.neardup import minhash, shingles
from tests.data import gen_content_keys
from tests.data.gen_word_tables import tables
from tests.minhash_reference import signature as reference_signature
from tests.sides import SIDES, document, only

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLES = ROOT / "crates/engine/src/neardup/tables.rs"
ENGINE = SIDES[0]

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


def engine_shingles(text: str, width: int) -> list[int]:
    """The engine's shingle hashes of `text`, ascending (NearDupSets, as the audit holds them)."""
    sets = NearDupSets(width)
    sets.add([text], 1)
    return np.frombuffer(sets.shingles(0), "<u8").tolist()


def engine_signature(text: str, width: int, k: int, seed: int) -> tuple[list[int], int]:
    """(values, shingle count) of `text`'s signature as the engine makes it."""
    sets = NearDupSets(width)
    size = int(np.frombuffer(sets.add([text], 1), "<u4")[0])
    return np.frombuffer(sets.sign(0, 1, k, seed, 1), "<u8").tolist(), size


def test_every_character_lowers_and_splits_as_in_python():
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for sep in ("", " ", "Σ", "AΣ"):  # each alone, in runs, and beside a capital sigma
        text = sep.join(chars)
        assert engine_shingles(text, 1) == words_as_hashes(text)


# Lone surrogates are left out: a request carrying one is refused before any rule runs.
CHARS = st.characters(exclude_categories=["Cs"])


@settings(max_examples=300)
@given(st.text(st.sampled_from(list("AaΣσς İı'.\u0301\u00ad_9 ·\u02b0ΑΒ")) | CHARS,
               max_size=40))
def test_words_match_python(text):
    assert engine_shingles(text, 1) == words_as_hashes(text)


def texts(max_words: int = 25) -> st.SearchStrategy[str]:
    word = st.sampled_from(VOCAB)
    return st.lists(st.tuples(word, st.sampled_from(SEPARATORS)), max_size=max_words).map(
        lambda parts: "".join(w + s for w, s in parts))


@settings(max_examples=200)
@given(texts() | st.text(CHARS, max_size=60), st.integers(1, 12))
def test_shingle_hashes_match_python(text, width):
    assert engine_shingles(text, width) == sorted(shingles.shingles(text, width))


def test_the_content_key_vectors_are_what_mmh3_computes():
    # the engine's side of them is crates/engine/src/neardup/cache.rs's content_keys_are_mmh3s
    assert gen_content_keys.OUT.read_text(encoding="utf-8") == gen_content_keys.document(), (
        "python -m tests.data.gen_content_keys")


@settings(max_examples=100)
@given(texts(), st.integers(1, 6), st.sampled_from([1, 16, 128, 300]), st.integers(0, 2**64 - 1))
def test_signatures_match_python(text, width, k, seed):
    sig = minhash.signature(shingles.shingles(text, width), k, seed)
    assert engine_signature(text, width, k, seed) == (sig.values.tolist(), sig.shingles)


def test_the_published_vectors():
    vectors = json.loads((ROOT / "tests/data/minhash_vectors.json").read_text())
    for case in vectors["cases"]:
        assert engine_signature(case["text"], case["width"], case["k"], case["seed"]) == (
            case["values"], case["shingles"])


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


def body(page) -> list[dict]:
    """The page as request documents d0, d1, … in rank order (scores descending)."""
    docs = []
    for n, (text, sig) in enumerate(page):
        fields = {} if text is None else {"text": text}
        if sig is not None:
            fields["minhash"] = sig
        docs.append(document(f"d{n}", score=float(len(page) - n), **fields))
    return docs


def rerank(params, page):
    """The engine's answer to the page under a profile of the rule alone, caches off."""
    config = only("diversify", {"near_duplicates": {**params, "cache_mb": 0,
                                                    "exact_cache_mb": 0}})
    return ENGINE.rerank(config, body(page))


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


# 150 pages of every method, measure and width reach as much of the rule as 300 did
# (docs/development.md says how the counts were chosen): 100 already did.
PAGE_SETTINGS = settings(max_examples=150, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])


def reason(params, value: float, leader: int, method: str) -> str:
    """The audit reason of a fold, as docs/near-duplicates.md writes it."""
    how = f" (MinHash estimate, k={params['num_perm']})" if method == "minhash" else ""
    return (f"{params['measure']} {value:.2f} >= {params['threshold']:g} with d{leader}{how}; "
            "collapsed under it")


@PAGE_SETTINGS
@given(pages())
def test_the_folds_their_values_and_the_method_are_the_definitions(page):
    params, raw = page
    answer = rerank(params, raw)
    expected, method = expected_pairs(params, raw)
    folded = {i for i, _, _ in expected}
    assert answer.ids() == [f"d{n}" for n in range(len(raw)) if n not in folded]
    under = {f"d{n}": [f"d{i}" for i, j, _ in expected if j == n] for n in range(len(raw))}
    assert {d["id"]: [c["id"] for c in d["collapsed"]] for d in answer.documents} == {
        d: under[d] for d in answer.ids()}
    assert [(r["doc_id"], r["reason"]) for r in answer.records("near_duplicates")] == [
        (f"d{i}", reason(params, v, j, method)) for i, j, v in expected]


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
    answer = rerank(params, raw)
    compared = sum(1 for text, sig in raw if text or sig is not None)
    if method_for(params, raw) == "exact" or compared < 2:
        assert answer.status == 200  # no signature is compared: none is refused
        return
    field = {"k": "values", "width": "width", "seed": "seed"}[next(iter(change))]
    # the first signature sent that this profile cannot compare: the drawn one, as the
    # page's own signatures are made with its parameters
    assert (answer.status, answer.body["field"]) == (422, f"documents[{at}].minhash.{field}")
    assert str(bad[field] if field != "values" else len(bad["values"])) in answer.body["problem"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
