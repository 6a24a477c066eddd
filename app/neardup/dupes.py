"""`rearrange dupes`: find templated near-duplicate pages on a site (seed 000).

Pages stream through stages, each with its progress: reading (or extracting main text from
saved HTML, app/neardup/read.py), shingling, signatures, candidates, verification,
clustering. Texts go to a temporary file as they arrive and are read back only for the
pages a report shows; shingle sets are held in the engine (`NearDupSets`, 8 bytes a
shingle) for exact scoring. Up to --exact-max pages every pair is compared exactly; above
that MinHash LSH proposes candidate pairs and each is scored exactly, so reported numbers
are never estimates. Clustering is app/neardup/cluster.py.
"""
from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from app._engine import NearDupSets
from app.neardup import minhash, shingles
from app.neardup.blocks import Block, shared_blocks
from app.neardup.cluster import Cluster, MultiTemplate, Progress, clusters
from app.neardup.compare import Change
from app.neardup.read import read_pages  # noqa: F401 (the CLI's import)
from app.neardup.site import Pairs, Site, Texts

REWORDED_THRESHOLD = 0.25  # --reworded's default: rewrites share 0.4 or more of their words,
# unrelated pages under 0.15
REWORDED_COMMON = 0.2  # --reworded leaves out words more than this share of pages use
REWORDED_MIN_COMMON = 20  # ... but never fewer pages than this
REWORDED_WINDOW = 8  # --reworded proposes pages sharing pairs of words met this close
REWORDED_PAIRS_JACCARD = 0.05  # ... aiming LSH at this Jaccard of those pairs
EXACT_MAX = 2000  # all-pairs up to this: 2M pairs, a second or two in the engine
SHINGLE_BATCH = 2048  # texts shingled per engine call
SIGN_BATCH = 8192  # signatures per engine call
PAIR_BATCH = 1 << 20  # pairs intersected per engine call
BOUND_DECIMALS = 10  # of a histogram's bounds: i / bins as people write it
# A share this little under a bound, in bins, is on it: 57 / 100 * 100 is 56.99999999999999
# in floats, while two shares of pages under a billion shingles differ by far more.
BOUND_SLACK = 1e-9


Sink = Callable[["Audit", int, np.ndarray], None]  # (audit, first page, (m, k) signatures)


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


@dataclass(slots=True)
class Audit:
    """Everything the reports need."""

    urls: list[str]  # of the pages with words
    sizes: np.ndarray  # their shingle counts
    skipped: list[str]  # URLs without any words of main text
    excluded: list[str]  # URLs left out by --exclude
    pairs: Pairs  # verified pairs sharing text (all pairs, for a handful of pages)
    method: str
    measure: str
    threshold: float
    site: Site
    width: int = shingles.DEFAULT_WIDTH
    lsh: tuple[int, int] | None = None  # (bands, rows) when MinHash LSH proposed the pairs
    candidates: int = 0
    clusters: list[Cluster] = field(default_factory=list)
    templates: dict[int, list[str]] = field(default_factory=dict)  # by representative, as shown
    multi: list[MultiTemplate] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    unique: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per page
    judged: object = None  # app/neardup/verdict.py's Verdicts, once asked for
    compared: tuple[str, list[Change]] | None = None  # --compare: the file, the changes
    reworded: bool = False  # pages compared by their distinctive words (--reworded)

    def __enter__(self) -> Audit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Delete the texts' temporary file (the reports read texts from it)."""
        self.site.texts.close()

    def jaccard(self, p: Pairs | None = None) -> np.ndarray:
        p = self.pairs if p is None else p
        both = p.both.astype(np.float64)
        union = self.sizes[p.a] + self.sizes[p.b] - both
        share: np.ndarray = np.divide(both, union, out=np.zeros_like(both), where=union > 0)
        return share

    def inside(self, p: Pairs | None = None) -> np.ndarray:
        """Share of a's shingles found in b (the seed's `in`)."""
        p = self.pairs if p is None else p
        share: np.ndarray = p.both / self.sizes[p.a]
        return share

    def outside(self, p: Pairs | None = None) -> np.ndarray:
        """Share of b's shingles found in a (the seed's `out`)."""
        p = self.pairs if p is None else p
        share: np.ndarray = p.both / self.sizes[p.b]
        return share

    def values(self, p: Pairs | None = None) -> np.ndarray:
        """What the threshold applies to: Jaccard, or the larger containment."""
        p = self.pairs if p is None else p
        if self.measure == "jaccard":
            return self.jaccard(p)
        share: np.ndarray = p.both / np.minimum(self.sizes[p.a], self.sizes[p.b])
        return share

    def over(self) -> Pairs:
        """The pairs at or over the threshold."""
        return self.pairs.take(self.values() >= self.threshold)

    def linked(self) -> Pairs:
        """The pairs clusters are made of: each page holds the threshold's share of its own
        shingles in the other (by Jaccard, with `--measure jaccard`)."""
        if self.measure == "jaccard":
            return self.pairs.take(self.jaccard() >= self.threshold)
        p = self.pairs
        own = p.both / np.maximum(self.sizes[p.a], self.sizes[p.b])
        return p.take(own >= self.threshold)

    def ranked(self, p: Pairs | None = None) -> Pairs:
        """Pairs by the measure, highest first (input order among ties)."""
        p = self.pairs if p is None else p
        order = np.lexsort((p.b, p.a, -self.values(p)))
        return p.take(order)

    def cluster_urls(self) -> list[list[str]]:
        """Each cluster's pages, representative first (what --json writes)."""
        return [[self.urls[i] for i in c.members] for c in self.clusters]

    def best_containment(self) -> np.ndarray:
        """For each page, the largest share of it found inside any one other page."""
        return self.nearest()[1]

    def nearest(self, skip: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """For each page, the page holding the largest share of it (-1 for none: no pair
        shares text with it) and that share; the earlier page among ties. Pages `skip`
        marks (bool per page) are nobody's nearest."""
        p = self.pairs
        page = np.concatenate([p.a, p.b]).astype(np.int64)
        other = np.concatenate([p.b, p.a]).astype(np.int64)
        share = np.concatenate([self.inside(), self.outside()])
        if skip is not None:
            keep = ~skip[other]
            page, other, share = page[keep], other[keep], share[keep]
        order = np.lexsort((other, -share, page))  # by page, then best share, then other
        first = np.ones(order.size, dtype=bool)
        first[1:] = page[order][1:] != page[order][:-1]
        best_of, best = np.full(len(self.urls), -1, np.int64), np.zeros(len(self.urls))
        best_of[page[order][first]] = other[order][first]
        best[page[order][first]] = share[order][first]
        best_of[best == 0] = -1  # the pairs listed in a small run share nothing
        return best_of, best


def audit(pages: Iterable[tuple[str, str]], width: int = shingles.DEFAULT_WIDTH,
          measure: str = "containment", threshold: float = shingles.DEFAULT_THRESHOLD,
          method: str = "auto", exact_max: int = EXACT_MAX, k: int = minhash.DEFAULT_K,
          max_size_ratio: float = 2.0, weights: tuple[float, float] = minhash.LSH_WEIGHTS,
          threads: int = 0, excluded: list[str] | None = None,
          progress: Progress = _no_progress, sink: Sink | None = None,
          reworded: bool = False) -> Audit:
    """Shingle every page, find the pairs that share text, cluster at the threshold.

    `excluded` is the list the reader appends the names of excluded pages to, as it goes.
    `sink`, when given, is handed each batch of signatures (the audit so far, first page,
    rows) as they are computed (--signatures); the exact method computes them for it alone.
    `reworded` compares pages by their distinctive words instead (`width` is then 1): the
    words 2 or more pages use but not more than REWORDED_COMMON of them.
    """
    if measure not in shingles.MEASURES:
        raise ValueError(f"measure must be one of {shingles.MEASURES}")
    texts = Texts()
    try:
        return _audit(texts, pages, 1 if reworded else width, measure, threshold, method,
                      exact_max, k, max_size_ratio, weights, threads or os.cpu_count() or 1,
                      excluded if excluded is not None else [], progress, sink, reworded)
    except BaseException:
        texts.close()
        raise


def _audit(texts: Texts, pages: Iterable[tuple[str, str]], width: int, measure: str,
           threshold: float, method: str, exact_max: int, k: int, max_size_ratio: float,
           weights: tuple[float, float], threads: int, excluded: list[str],
           progress: Progress, sink: Sink | None, reworded: bool) -> Audit:
    urls = []
    for url, text in pages:
        urls.append(url)
        texts.add(text)
    sets = NearDupSets(width)
    sizes = np.empty(len(texts), dtype=np.int64)
    done = 0
    progress("shingling", 0, len(texts))
    for batch in texts.batches(SHINGLE_BATCH):
        sizes[done:done + len(batch)] = np.frombuffer(sets.add(batch, threads), np.uint32)
        done += len(batch)
        progress("shingling", done, len(texts))
    if reworded:
        common = max(REWORDED_MIN_COMMON, int(REWORDED_COMMON * len(texts)))
        sizes = np.frombuffer(sets.keep_held_by(2, common), np.uint32).astype(np.int64)
    ids = np.flatnonzero(sizes > 0)
    site = Site(sets, texts, ids, sizes[ids], threads)
    without = [urls[i] for i in np.flatnonzero(sizes == 0)]
    result = Audit([urls[i] for i in ids], site.sizes, without, excluded, Pairs.empty(),
                   method, measure, threshold, site, width, reworded=reworded)
    n = ids.size
    if method == "auto":
        result.method = "exact" if n <= exact_max else "minhash"
    if result.method == "exact":
        if sink is not None:
            for first, rows in signatures(site, k, progress):
                sink(result, first, rows)
        result.pairs = _exact_pairs(site, n, progress)
    else:
        features = _cooccurring(texts, sets, threads, progress) if reworded else None
        _lsh_pairs(result, k, max_size_ratio, weights, progress, sink, features)
    linked, over = result.linked(), result.over()
    result.clusters, result.multi = clusters(
        n, (linked.a, linked.b, linked.both), (over.a, over.b, over.both), site.sizes,
        threshold, site.shared, progress)
    result.blocks, result.unique = shared_blocks(site, result.clusters, threshold, progress)
    return result


def _cooccurring(texts: Texts, words: NearDupSets, threads: int,
                 progress: Progress) -> NearDupSets:
    """--reworded's candidates' features: each page's pairs of distinctive words met within
    REWORDED_WINDOW words (only LSH needs them: the exact method scores every pair)."""
    features, done = NearDupSets(1), 0
    progress("co-occurrences", 0, len(texts))
    for batch in texts.batches(SHINGLE_BATCH):
        features.add_cooccurring(batch, words, done, REWORDED_WINDOW, threads)
        done += len(batch)
        progress("co-occurrences", done, len(texts))
    return features


def _exact_pairs(site: Site, n: int, progress: Progress) -> Pairs:
    """Every pair that shares a shingle; every pair at all when there are few (as the seed)."""
    total = n * (n - 1) // 2
    keep_zero = total <= 1000
    found, done = [], 0
    rows = max(1, PAIR_BATCH // max(n, 1))
    progress("comparing", 0, total)
    for first in range(0, n, rows):
        mine = range(first, min(first + rows, n))
        a = np.repeat(np.arange(first, mine.stop), [n - 1 - i for i in mine])
        b = np.concatenate([np.arange(i + 1, n) for i in mine])
        pairs = Pairs(a.astype(np.int32), b.astype(np.int32), site.intersections(a, b))
        found.append(pairs if keep_zero else pairs.take(pairs.both > 0))
        done += len(pairs)
        progress("comparing", done, total)
    return _concat(found)


def _concat(parts: list[Pairs]) -> Pairs:
    if not parts:
        return Pairs.empty()
    return Pairs(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("a", "b", "both")))


def lsh_jaccard_floor(measure: str, threshold: float, max_size_ratio: float) -> float:
    """The lowest Jaccard a pair meeting the threshold can have, for LSH to aim at.

    A share t of page A inside page B with |B| <= R |A| means J >= t / (1 + R - t);
    pairs of pages whose sizes differ by more than R can be missed (docs/near-duplicates.md).
    """
    if measure == "jaccard":
        return threshold
    return threshold / (1.0 + max_size_ratio - threshold)


def _lsh_pairs(result: Audit, k: int, max_size_ratio: float, weights: tuple[float, float],
               progress: Progress, sink: Sink | None,
               features: NearDupSets | None = None) -> None:
    """Signatures stream batch by batch into LSH band keys; candidates are then verified.
    With `features` (--reworded: pairs of words met close together) the signatures are
    theirs, aimed at REWORDED_PAIRS_JACCARD, and the pages' own sets verify."""
    site, n = result.site, len(result.urls)
    floor = (REWORDED_PAIRS_JACCARD if features is not None else
             lsh_jaccard_floor(result.measure, result.threshold, max_size_ratio))
    bands, rows = minhash.lsh_params(floor, k, *weights)
    keys = np.empty((n, bands), dtype=np.uint64)
    for first, matrix in signatures(site, k, progress, sets=features):
        keys[first:first + len(matrix)] = minhash.band_keys(matrix, bands, rows)
        if sink is not None:
            sink(result, first, matrix)
    candidates = minhash.pairs_of_keys(
        keys, lambda done, total: progress("candidates", done, total))
    del keys
    result.lsh, result.candidates = (bands, rows), len(candidates)
    found = []
    progress("verifying", 0, len(candidates))
    for first in range(0, len(candidates), PAIR_BATCH):
        a, b = candidates[first:first + PAIR_BATCH].T
        pairs = Pairs(a.astype(np.int32), b.astype(np.int32), site.intersections(a, b))
        found.append(pairs.take(pairs.both > 0))
        progress("verifying", first + a.size, len(candidates))
    result.pairs = _concat(found)


def signatures(site: Site, k: int, progress: Progress = _no_progress,
               seed: int = minhash.DEFAULT_SEED,
               sets: NearDupSets | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(first page, (m, k) uint64 signatures) of the pages with words, a batch at a time
    (of `sets` when given: other sets held for the same pages)."""
    n = site.ids.size
    progress("signatures", 0, n)
    for first in range(0, n, SIGN_BATCH):
        ids = site.ids[first:first + SIGN_BATCH]
        lo, hi = int(ids[0]), int(ids[-1]) + 1
        held = site.sets if sets is None else sets
        rows = np.frombuffer(held.sign(lo, hi, k, seed, site.threads),
                             dtype=np.uint64).reshape(hi - lo, k)
        yield first, rows[ids - lo]
        progress("signatures", first + ids.size, n)


def histogram(values: np.ndarray, bins: int = 10) -> list[tuple[float, float, int]]:
    """(low, high, count) over [0, 1] in equal bins, each from its low bound up to its high
    one, 1.0 in the last. A share at exactly a bound (3 / 10) falls in the bin it opens
    (numpy's bounds, 0.30000000000000004, put it in the one below), and the bounds are
    i / bins to 10 decimals, so 0.3 as people write it."""
    counts = np.bincount(bin_of(values, bins), minlength=bins)
    edges = np.round(np.arange(bins + 1) / bins, BOUND_DECIMALS)
    return [(float(edges[i]), float(edges[i + 1]), int(counts[i])) for i in range(bins)]


def bin_of(values: np.ndarray, bins: int = 10) -> np.ndarray:
    """Each value's bin of `histogram` (its number, from 0)."""
    scaled = np.clip(values, 0.0, 1.0) * bins + BOUND_SLACK
    which: np.ndarray = np.minimum(np.floor(scaled).astype(np.int64), bins - 1)
    return which


def bin_labels(counts: list[tuple[float, float, int]]) -> list[str]:
    """"0.3-0.4" for each bin of a histogram: every bound with one number of decimals, the
    fewest that write them all exactly (0.05 for 20 bins, 0.125 for 8), or for bins that
    no few decimals write (thirds) two more than the digits of the number of bins."""
    bounds = [low for low, _, _ in counts] + [counts[-1][1]] if counts else []
    most = len(str(len(counts))) + 2
    decimals = next((d for d in range(1, most) if all(round(b, d) == b for b in bounds)), most)
    return [f"{low:.{decimals}f}-{high:.{decimals}f}" for low, high, _ in counts]


def near_threshold(result: Audit, n: int, margin: float = 0.1, seed: int = 0) -> Pairs:
    """Up to n random pairs within ±margin of the threshold, to open and judge by eye."""
    close = np.flatnonzero(np.abs(result.values() - result.threshold) <= margin)
    picked = sorted(random.Random(seed).sample(close.tolist(), min(n, close.size)))
    return result.ranked(result.pairs.take(np.asarray(picked, dtype=np.int64)))
