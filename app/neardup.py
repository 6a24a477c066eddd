"""Near-duplicate matching on MinHash signatures for the `near_duplicates` rule.

A document's signature comes from the request (`documents[i].minhash`, computed upstream
with the family of app/minhash.py), else from the rule's cache by the text's content hash,
else it is computed from the text and cached. Agreements between all signatures are
counted at once (app.minhash.collisions), Jaccard and containment estimated from them, and
each document folded under the first kept higher one it matches, as the exact path does.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app import minhash, shingles
from app.errors import FieldError
from app.sigcache import SignatureCache, content_key

# Measured by bench/near_duplicates.py (README "The switch"): with 300-word texts and a
# cold cache, MinHash overtakes exact pairs at about this many documents with text.
EXACT_MAX_DOCS = 30


class Matcher:
    """Signature lookup, checking and comparison for one configured rule."""

    def __init__(self, width: int, measure: str, threshold: float, k: int, seed: int,
                 cache: SignatureCache | None) -> None:
        self.width = width
        self.measure = measure
        self.threshold = threshold
        self.k = k
        self.seed = seed
        self.cache = cache

    def signature_of(self, text: str) -> minhash.Signature:
        """The signature of a text: from the cache, or computed and cached."""
        key = content_key(text) if self.cache is not None else 0
        sig = self.cache.get(key) if self.cache is not None else None
        if sig is None:
            sig = minhash.signature(shingles.shingles(text, self.width), self.k, self.seed)
            sig.values.flags.writeable = False  # shared by every request that hits it
            if self.cache is not None:
                self.cache.put(key, sig)
        return sig

    def check(self, sent: Any, position: int) -> None:
        """Refuse a precomputed signature this rule cannot compare (FieldError names it)."""
        at = f"documents[{position}].minhash"
        if len(sent.values) != self.k:
            raise FieldError(f"{at}.values", f"{len(sent.values)} values, but this profile's "
                             f"near_duplicates compares k={self.k} (num_perm)")
        if sent.width != self.width:
            raise FieldError(f"{at}.width", f"shingles of {sent.width} words, but this "
                             f"profile's near_duplicates uses {self.width} (shingle_words)")
        if sent.seed != self.seed:
            raise FieldError(f"{at}.seed", f"family seed {sent.seed}, but this profile's "
                             f"near_duplicates uses {self.seed}")

    def minhash_pairs(self, docs: Sequence[Any]) -> list[tuple[int, int, float]]:
        """(i, j, estimate) for each doc folded under the first kept higher doc j it matches."""
        where: list[int] = []
        rows: list[Any] = []
        sizes: list[int] = []
        for i, doc in enumerate(docs):
            sent = doc.signature
            if sent is not None:
                self.check(sent, doc.original_position - 1)
                if sent.shingles == 0:
                    continue
                rows.append(sent.values)  # a list of ints: converted below, all at once
                sizes.append(sent.shingles)
            elif doc.text:
                sig = self.signature_of(doc.text)
                if sig.shingles == 0:
                    continue
                rows.append(sig.values)
                sizes.append(sig.shingles)
            else:
                continue
            where.append(i)
        if len(rows) < 2:
            return []
        if all(isinstance(row, list) for row in rows):
            matrix = np.array(rows, dtype=np.uint64)
        else:
            matrix = np.stack([np.asarray(row, dtype=np.uint64) for row in rows])
        agree = minhash.collisions(matrix)
        lower, higher = np.nonzero(agree)  # row-major: lower-ranked doc ascending, then higher
        if lower.size == 0:
            return []
        jac = agree[lower, higher] / self.k
        if self.measure == "containment":
            size = np.asarray(sizes, dtype=np.float64)
            values = minhash.containment_from(jac, size[lower], size[higher])
        else:
            values = jac
        hit = np.flatnonzero(values >= self.threshold)
        folded: dict[int, tuple[int, float]] = {}
        for h in hit.tolist():
            i, j = int(lower[h]), int(higher[h])
            if i in folded or j in folded:  # i already placed, or j is not kept
                continue
            folded[i] = (j, float(values[h]))
        return [(where[i], where[j], value) for i, (j, value) in folded.items()]
