"""Word shingles and set similarity for finding templated (near-duplicate) pages.

A shingle is a window of ``width`` consecutive words (Broder, "On the resemblance and
containment of documents"); the default width of 10 and the threshold of 0.5 come from
"Syntactic Clustering of the Web", the only published threshold we know of. It is a
researchers' threshold, not a search engine's spam cut-off: tune it on real pages.

The serve-time rule and the offline audit tool both import this module, so the
tokenisation and the hash must stay identical between them and across processes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass

import mmh3

DEFAULT_WIDTH = 10
DEFAULT_THRESHOLD = 0.5
MEASURES = ("containment", "jaccard")

_WORD = re.compile(r"\w+")  # str patterns are Unicode-aware: Cyrillic letters are \w
# Fixed seed: shingle hashes may be stored by the audit tool and compared later, so
# changing it (or the hash function) invalidates every stored set.
_HASH_SEED = 0


def words(text: str) -> list[str]:
    """Split text into lowercased Unicode ``\\w+`` tokens."""
    return _WORD.findall(text.lower())


def _check_width(width: int) -> None:
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width!r}")


def shingles(text: str, width: int = DEFAULT_WIDTH) -> frozenset[int]:
    """Return the set of ``width``-word shingles of text, each hashed to an unsigned 64-bit int.

    Texts shorter than one shingle are handled explicitly: 1..width-1 words yield a
    single shingle made of all the words (so two identical short texts still match),
    and a text with no words yields an empty set (which never matches anything).
    """
    _check_width(width)
    # Encoding each word once is ~15% faster than letting mmh3 encode every joined
    # window; the hash is the same, since mmh3 hashes str as its UTF-8 bytes.
    tokens = [word.encode() for word in words(text)]
    if len(tokens) < width:
        windows = [b" ".join(tokens)] if tokens else []
    else:
        windows = [b" ".join(tokens[i : i + width]) for i in range(len(tokens) - width + 1)]
    # Builtin hash() is salted per process (PYTHONHASHSEED); murmur3 is not.
    return frozenset([mmh3.hash64(w, seed=_HASH_SEED, signed=False)[0] for w in windows])


def jaccard(a: Set[int], b: Set[int]) -> float:
    """Return |a ∩ b| / |a ∪ b|, or 0.0 if both sets are empty."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def containment(a: Set[int], b: Set[int]) -> float:
    """Return the share of a's shingles found in b (asymmetric), or 0.0 if a is empty."""
    return len(a & b) / len(a) if a else 0.0


@dataclass(frozen=True, slots=True)
class Similarity:
    """All three numbers for one pair of shingle sets."""

    jaccard: float
    contained: float  # share of a in b
    contains: float  # share of b in a


def compare(a: Set[int], b: Set[int]) -> Similarity:
    """Return Jaccard and containment in both directions for a pair of shingle sets."""
    return Similarity(jaccard(a, b), containment(a, b), containment(b, a))


def score(measure: str, a: Set[int], b: Set[int]) -> float:
    """Score a lower-ranked doc a against a higher-ranked doc b by the named measure.

    "containment" is the share of a's shingles inside b: a short page wholly reused
    in a longer template scores high even though its Jaccard is low, and a is folded
    under b when this reaches the threshold. "jaccard" is symmetric.
    """
    if measure == "containment":
        return containment(a, b)
    if measure == "jaccard":
        return jaccard(a, b)
    raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")


def find_duplicates(
    texts: Sequence[str | None],
    width: int = DEFAULT_WIDTH,
    measure: str = "containment",
    threshold: float = DEFAULT_THRESHOLD,
) -> list[tuple[int, int, float]]:
    """Fold each text under the first higher-ranked kept text it matches; return (i, j, score).

    texts are in rank order. A folded text is never a target, so folds do not chain
    (c similar to folded b but not to a stays kept). None and empty texts are neither
    folded nor fold others.
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    _check_width(width)
    # Written as a negated range so that NaN is rejected too.
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    return fold([shingles(text, width) if text else frozenset() for text in texts],
                measure, threshold)


def fold(sets: Sequence[Set[int]], measure: str, threshold: float,
         checkpoint: Callable[[], None] | None = None) -> list[tuple[int, int, float]]:
    """find_duplicates on shingle sets already made (rank order; empty sets never match).

    `checkpoint`, when given, is called before each set is compared with the kept ones
    above it, and may raise to abandon the work (the serve-time rule's deadline).
    """
    kept: list[tuple[int, Set[int]]] = []
    folded: list[tuple[int, int, float]] = []
    for i, sh in enumerate(sets):
        if not sh:
            continue
        if checkpoint is not None:
            checkpoint()
        for j, target in kept:
            value = score(measure, sh, target)
            if value >= threshold:
                folded.append((i, j, value))
                break
        else:
            kept.append((i, sh))
    return folded
