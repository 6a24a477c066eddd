"""MinHash: the published family, estimate error against exact values, LSH recall."""
from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from app.neardup import minhash, shingles
from tests.corpus import corpus
from tests.minhash_reference import coefficients
from tests.minhash_reference import signature as reference_signature
from tests.neardup.test_shingles import KAZAN, OMSK, PERM, RETURNS

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "minhash_vectors.json").read_text())


def collisions(matrix: np.ndarray) -> np.ndarray:
    """minhash.agreements as a dense lower-triangular (n, n) matrix."""
    n = matrix.shape[0]
    dense = np.zeros((n, n), dtype=np.int64)
    i, j, count = minhash.agreements(matrix)
    dense[i, j] = count
    return dense


def containment_from(jac: float, size_a: int, size_b: int) -> float:
    """Estimated share of A inside B from Jaccard and the two set sizes (0 when A is empty):
    |A ∩ B| = J (|A| + |B|) / (1 + J), over |A|, at most 1."""
    return min(jac * (size_a + size_b) / (1.0 + jac) / size_a, 1.0) if size_a else 0.0


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: f"k{c['k']}-{c['text'][:12]}")
def test_signature_matches_the_published_vectors(case):
    sig = minhash.signature(shingles.shingles(case["text"], case["width"]), case["k"],
                            case["seed"])
    assert sig.values.dtype == np.uint64
    assert sig.values.tolist() == case["values"]
    assert sig.shingles == case["shingles"]


def test_vector_file_is_what_the_plain_python_reference_computes():
    # The file was written by tests/minhash_reference.py; recomputing guards both sides.
    for case in VECTORS["cases"]:
        assert reference_signature(case["text"], case["k"], case["seed"]) == {
            key: case[key] for key in ("values", "shingles", "width", "seed")}
    a, b = minhash.family(4, 1)
    assert [list(c) for c in coefficients(4, 1)] == VECTORS["coefficients_k4_seed1"] == [
        [int(x), int(y)] for x, y in zip(a, b, strict=True)]
    assert all(int(x) % 2 == 1 for x in a)  # odd multipliers: each h_i is a permutation


def test_empty_set_signature_is_all_max_and_never_agrees_with_words():
    empty = minhash.signature([], 16)
    assert empty.shingles == 0 and set(empty.values.tolist()) == {2**64 - 1}
    agree = collisions(np.stack([empty.values,
                                         minhash.signature([1, 2, 3], 16).values]))
    assert agree[1, 0] == 0


def test_family_refuses_bad_parameters():
    with pytest.raises(ValueError, match="k must be"):
        minhash.family(0, 1)
    with pytest.raises(ValueError, match="seed must be"):
        minhash.family(16, -1)


def test_collisions_equal_the_broadcast_comparison():
    rng = np.random.default_rng(5)
    matrix = rng.integers(0, 4, size=(40, 64), dtype=np.uint64)  # many ties, long runs
    matrix[7] = matrix[3]  # and identical rows
    dense = (matrix[:, None, :] == matrix[None, :, :]).sum(axis=2)
    np.fill_diagonal(dense, 0)
    assert (collisions(matrix) == np.tril(dense, -1)).all()
    assert collisions(matrix[:1]).tolist() == [[0]]


def test_agreements_sparse_and_in_fold_order():
    # Few agreements among many rows: the keys are sorted rather than counted densely.
    rng = np.random.default_rng(6)
    matrix = rng.integers(0, 2**63, size=(300, 32), dtype=np.uint64)
    matrix[250, :10] = matrix[3, :10]
    matrix[120] = matrix[7]
    matrix[299, 5:7] = matrix[120, 5:7]
    lower, higher, count = minhash.agreements(matrix)
    assert list(zip(lower.tolist(), higher.tolist(), count.tolist(), strict=True)) == [
        (120, 7, 32), (250, 3, 10), (299, 7, 2), (299, 120, 2)]
    dense = (matrix[:, None, :] == matrix[None, :, :]).sum(axis=2)
    assert (collisions(matrix) == np.tril(dense, -1)).all()


def test_containment_from_jaccard_and_sizes():
    # |A| = 10, |B| = 30, |A ∩ B| = 8: J = 8/32 = 0.25, so the share of A inside B is 0.8.
    assert containment_from(0.25, 10, 30) == pytest.approx(0.8)
    assert containment_from(0.25, 30, 10) == pytest.approx(8 / 30)
    assert containment_from(1.0, 0, 5) == 0.0  # an empty A is inside nothing
    # J = 0.9 with |A| = 3, |B| = 5 would put 3.8 shared shingles in A: clipped to all of A
    assert containment_from(0.9, 3, 5) == 1.0


def test_seed_pages_estimates_within_the_stated_error():
    sets = [shingles.shingles(t) for t in (KAZAN, PERM, OMSK, RETURNS)]
    matrix, sizes = minhash.signatures(sets)
    lower = collisions(matrix)
    agree = lower + lower.T
    for i in range(4):
        for j in range(4):
            if i == j:
                continue
            est_j = agree[i, j] / minhash.DEFAULT_K
            assert abs(est_j - shingles.jaccard(sets[i], sets[j])) <= 0.15
            est_c = containment_from(est_j, sizes[i], sizes[j])
            assert abs(est_c - shingles.containment(sets[i], sets[j])) <= 0.25
    assert agree[3, 0] == 0  # the unrelated article agrees nowhere


def test_estimates_within_the_stated_error_on_a_generated_corpus():
    """k=128: |Jaccard error| <= 0.15 on every pair, mean <= 0.04; containment <= 0.25, mean
    <= 0.05. The standard deviation of the Jaccard estimate is sqrt(J(1-J)/k) <= 0.044, so
    0.15 is 3.4 sigma at the worst J; containment amplifies it by up to 2/(1+J)^2."""
    docs = corpus(300, seed=3)
    sets = [shingles.shingles(text) for _, text in docs]
    matrix, sizes = minhash.signatures(sets)
    lower = collisions(matrix)
    agree = lower + lower.T
    j_err, c_err = [], []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            inter = len(sets[i] & sets[j])
            if not inter:
                continue
            exact_j = inter / len(sets[i] | sets[j])
            est_j = agree[i, j] / minhash.DEFAULT_K
            j_err.append(abs(est_j - exact_j))
            c_err.append(abs(containment_from(est_j, sizes[i], sizes[j])
                             - inter / len(sets[i])))
    assert len(j_err) > 500  # the corpus has pairs across the whole range
    assert max(j_err) <= 0.15 and np.mean(j_err) <= 0.04
    assert max(c_err) <= 0.25 and np.mean(c_err) <= 0.05


def _error(threshold: float, bands: int, rows: int, fp: float, fn: float) -> float:
    """The weighted error by the midpoint rule (datasketch's fallback without scipy)."""
    step = 1e-4
    lo = np.arange(step / 2, threshold, step)
    hi = np.arange(threshold + step / 2, 1.0, step)
    p = lambda s: 1 - (1 - s**rows) ** bands  # noqa: E731
    return fp * p(lo).sum() * step + fn * (1 - p(hi)).sum() * step


@pytest.mark.parametrize(("threshold", "weights"), [
    (0.2, (0.5, 0.5)), (0.5, (0.5, 0.5)), (0.8, (0.5, 0.5)), (0.5, (0.2, 0.8)), (0.3, (0.9, 0.1)),
])
def test_lsh_params_minimize_the_weighted_error(threshold, weights):
    k = 64
    bands, rows = minhash.lsh_params(threshold, k, *weights)
    assert bands * rows <= k
    chosen = _error(threshold, bands, rows, *weights)
    every = [_error(threshold, b, r, *weights)
             for b in range(1, k + 1) for r in range(1, k // b + 1)]
    assert chosen <= min(every) + 1e-4


def test_lsh_params_trade_candidates_for_recall_with_the_weights():
    # more weight on false negatives: a higher candidate probability at the threshold
    def p(b, r, s):
        return 1 - (1 - s**r) ** b
    even = minhash.lsh_params(0.5, 128, 0.5, 0.5)
    recall = minhash.lsh_params(0.5, 128, 0.2, 0.8)
    assert p(*recall, 0.5) > p(*even, 0.5) and p(*recall, 0.3) > p(*even, 0.3)


def sharing_pairs(sets: list[set[int]]) -> set[tuple[int, int]]:
    """Every pair (i < j) of sets holding a shingle in common: the only pairs whose Jaccard
    is above 0, found through who holds each shingle rather than by trying all pairs."""
    holders: dict[int, list[int]] = defaultdict(list)
    for n, held in enumerate(sets):
        for shingle in held:
            holders[shingle].append(n)
    return {pair for group in holders.values() for pair in itertools.combinations(group, 2)}


def test_lsh_recall_of_exact_pairs_over_the_threshold():
    docs = corpus(800, seed=11)
    sets = [shingles.shingles(text) for _, text in docs]
    matrix, _ = minhash.signatures(sets)
    threshold = 0.5
    bands, rows = minhash.lsh_params(threshold, 128, *minhash.LSH_WEIGHTS)
    candidates = {tuple(p) for p in minhash.pairs_of_keys(
        minhash.band_keys(matrix, bands, rows)).tolist()}
    exact = {(i, j) for i, j in sharing_pairs(sets)
             if shingles.jaccard(sets[i], sets[j]) >= threshold}
    assert len(exact) > 300
    recall = len(exact & candidates) / len(exact)
    assert recall >= 0.95, (recall, len(exact))
    assert len(candidates) < 5 * len(exact)  # and it did not just propose every pair
