"""Near-duplicate matching on MinHash signatures for the reference `near_duplicates` rule.

A document's signature comes from the request (`documents[i].minhash`, computed upstream
with the family of app/neardup/minhash.py), else from the rule's cache by the text's content hash,
else it is computed from the text and cached. Agreements between all signatures are
counted at once (app.neardup.minhash.agreements), Jaccard and containment estimated from them, and
each document folded under the first kept higher one it matches, as the exact path does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from app.errors import FieldError
from app.neardup import minhash, shingles
from tests.reference.minhash import containment_from
from tests.reference.sigcache import SignatureCache, content_key

_HITS_PER_CHECK = 4096  # matching pairs folded between two checkpoints


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

    def text_signatures(self, texts: Sequence[str],
                        checkpoint: Callable[[], None] | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
        """(values, shingle counts) of texts: from the cache, else computed and cached.

        `checkpoint`, when given, is called before each text is signed and may raise to
        abandon the work; what was signed by then stays cached for the next page.
        """
        if self.cache is None:
            keys: list[int] = []
            values = np.empty((len(texts), self.k), dtype=np.uint64)
            sizes = np.empty(len(texts), dtype=np.int64)
            missing: Sequence[int] = range(len(texts))
        else:
            keys = [content_key(text) for text in texts]
            values, sizes, missing = self.cache.fetch(keys)
        done: dict[str, int] = {}  # the same text twice on a page is shingled once
        for n in missing:
            if checkpoint is not None:
                checkpoint()
            first = done.setdefault(texts[n], n)
            if first != n:
                values[n], sizes[n] = values[first], sizes[first]
                continue
            sig = minhash.signature(shingles.shingles(texts[n], self.width), self.k, self.seed)
            values[n], sizes[n] = sig.values, sig.shingles
            if self.cache is not None:
                self.cache.put(keys[n], sig.values, sig.shingles)
        return values, sizes

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

    def minhash_pairs(self, docs: Sequence[Any], checkpoint: Callable[[], None] | None = None
                      ) -> list[tuple[int, int, float]]:
        """(i, j, estimate) for each doc folded under the first kept higher doc j it matches.

        `checkpoint` (see text_signatures) is also called per distance while counting
        agreements and per block of matching pairs while folding.
        """
        where: list[int] = []
        sent, sent_at, texts, text_at = [], [], [], []
        for i, doc in enumerate(docs):
            if doc.signature is not None:
                self.check(doc.signature, doc.original_position - 1)
                sent_at.append(len(where))
                sent.append(doc.signature)
            elif doc.text:
                text_at.append(len(where))
                texts.append(doc.text)
            else:
                continue
            where.append(i)
        if len(where) < 2:
            return []
        matrix = np.empty((len(where), self.k), dtype=np.uint64)
        sizes = np.empty(len(where), dtype=np.int64)
        if sent:
            matrix[sent_at] = np.array([s.values for s in sent], dtype=np.uint64)
            sizes[sent_at] = [s.shingles for s in sent]
        if texts:
            matrix[text_at], sizes[text_at] = self.text_signatures(texts, checkpoint)
        if not sizes.all():  # texts without words (and signatures saying so) match nothing
            keep = np.flatnonzero(sizes)
            matrix, sizes, where = matrix[keep], sizes[keep], [where[n] for n in keep.tolist()]
            if len(where) < 2:
                return []
        # by lower-ranked doc, then higher
        lower, higher, agree = minhash.agreements(matrix, checkpoint)
        if lower.size == 0:
            return []
        jac = agree / self.k
        if self.measure == "containment":
            values = containment_from(jac, sizes[lower], sizes[higher])
        else:
            values = jac
        hit = np.flatnonzero(values >= self.threshold)
        folded: dict[int, tuple[int, float]] = {}
        for start in range(0, hit.size, _HITS_PER_CHECK):
            if checkpoint is not None:
                checkpoint()
            for h in hit[start:start + _HITS_PER_CHECK].tolist():
                i, j = int(lower[h]), int(higher[h])
                if i in folded or j in folded:  # i already placed, or j is not kept
                    continue
                folded[i] = (j, float(values[h]))
        return [(where[i], where[j], value) for i, (j, value) in folded.items()]
