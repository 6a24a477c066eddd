"""What the reference model and the tests compute on top of app/neardup/minhash.py's
primitives (`agreements`, `band_keys`, `pairs_of_keys`): containment estimated from Jaccard,
the agreements as a dense matrix, and LSH candidate pairs in one call."""
from __future__ import annotations

import numpy as np

from app.neardup.minhash import agreements, band_keys, pairs_of_keys


def collisions(matrix: np.ndarray) -> np.ndarray:
    """The agreements as a dense lower-triangular (n, n) matrix."""
    n = matrix.shape[0]
    dense = np.zeros((n, n), dtype=np.int64)
    i, j, count = agreements(matrix)
    dense[i, j] = count
    return dense


def containment_from(jac: np.ndarray | float, size_a: np.ndarray | int,
                     size_b: np.ndarray | int) -> np.ndarray | float:
    """Estimated share of A inside B from Jaccard and the two set sizes (0 when A is empty):
    |A ∩ B| = J (|A| + |B|) / (1 + J), over |A|."""
    inter = jac * (np.add(size_a, size_b)) / (1.0 + np.asarray(jac))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(np.asarray(size_a) > 0, inter / np.maximum(size_a, 1), 0.0)
    return np.minimum(share, 1.0)


def candidate_pairs(matrix: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Pairs (i < j) that agree on all rows of at least one band, as an (m, 2) int64 array."""
    return pairs_of_keys(band_keys(matrix, bands, rows))
